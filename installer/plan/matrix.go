package plan

// matrix is a dense table of int64 in one allocation: a row per node (or per class), a column
// per resource dimension. At 50,000 nodes a slice per row would be as many allocations.
type matrix struct {
	cols int
	v    []int64
}

func newMatrix(rows, cols int) matrix { return matrix{cols: cols, v: make([]int64, rows*cols)} }

// row is row n, sharing the matrix's storage.
func (m matrix) row(n int) []int64 { return m.v[n*m.cols : (n+1)*m.cols] }

// clone is a copy that shares nothing with m.
func (m matrix) clone() matrix { return matrix{cols: m.cols, v: append([]int64(nil), m.v...)} }
