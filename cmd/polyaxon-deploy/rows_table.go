package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// rowsSummary is the one-line total of a row count map: "2300 in 6 tables".
func rowsSummary(rows map[string]int64) string {
	return fmt.Sprintf("%d in %d tables", backup.TotalRows(rows), len(rows))
}

// rowsBlock is the per-table block that ends backup's and restore's tables: an empty row (it
// ends the FIELD/VALUE block), a header, and a row per table. With inBackup (restore) a
// third column shows what the backup recorded, so the two can be compared at a glance.
func rowsBlock(rows, inBackup map[string]int64) [][]string {
	if len(rows) == 0 {
		return nil
	}
	header := []string{"TABLE", "ROWS"}
	if inBackup != nil {
		header = append(header, "IN BACKUP")
	}
	out := [][]string{{}, header}
	for _, t := range slices.Sorted(maps.Keys(rows)) {
		r := []string{t, strconv.FormatInt(rows[t], 10)}
		if inBackup != nil {
			b, ok := inBackup[t]
			if ok {
				r = append(r, strconv.FormatInt(b, 10))
			} else {
				r = append(r, "-")
			}
		}
		out = append(out, r)
	}
	return out
}
