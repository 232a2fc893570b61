package values

import (
	"errors"
	"fmt"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
)

// SetPair is one key=value of a --set style argument, as written (escapes kept).
type SetPair struct {
	Key   string
	Value string
	// Assigned is false for a key written without '=' (strvals refuses it: no value).
	Assigned bool
}

// SplitSetArg splits one --set, --set-string or --set-file argument into its pairs the way
// Helm's strvals reads it: pairs are separated by commas, except an escaped comma (\,) and the
// commas of a {list} value. strvals silently drops a pair without a key (`=x`) and accepts an
// empty argument; both are refused here, since they can only be mistakes.
func SplitSetArg(arg string) ([]SetPair, error) {
	if strings.TrimSpace(arg) == "" {
		return nil, errors.New("empty argument: want key=value")
	}
	pairs := scanPairs(arg)
	for _, p := range pairs {
		if p.Assigned && strings.TrimSpace(p.Key) == "" {
			return nil, fmt.Errorf("a pair has no key before '=' (in %q): want key=value", redactArg(arg))
		}
	}
	return pairs, nil
}

// scanPairs splits arg into pairs (see SplitSetArg) without judging them.
func scanPairs(arg string) []SetPair {
	var pairs []SetPair
	rs := []rune(arg)
	i := 0
	for i < len(rs) {
		key := scanUntil(rs, &i, "=,")
		p := SetPair{Key: key}
		if i < len(rs) && rs[i] == '=' {
			i++
			p.Assigned = true
			if i < len(rs) && rs[i] == '{' {
				p.Value = scanList(rs, &i)
			} else {
				p.Value = scanUntil(rs, &i, ",")
			}
		}
		pairs = append(pairs, p)
		if i < len(rs) && rs[i] == ',' {
			i++
		}
	}
	return pairs
}

// scanUntil reads runes up to one of stops (not escaped), which it leaves unread.
func scanUntil(rs []rune, i *int, stops string) string {
	return scan(rs, i, func(r rune) (bool, bool) { return strings.ContainsRune(stops, r), false })
}

// scanList reads a {list} value, braces included, up to the brace that closes the first.
func scanList(rs []rune, i *int) string {
	depth := 0
	return scan(rs, i, func(r rune) (bool, bool) {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		}
		return depth == 0, true
	})
}

// scan reads runes from rs[*i] until stop says so, after reading that rune or before it
// (take). An escaped rune (\x) is read as written and never shown to stop.
func scan(rs []rune, i *int, stop func(r rune) (end, take bool)) string {
	var b strings.Builder
	for *i < len(rs) {
		r := rs[*i]
		if r == '\\' && *i+1 < len(rs) {
			b.WriteRune(r)
			b.WriteRune(rs[*i+1])
			*i += 2
			continue
		}
		end, take := stop(r)
		if end && !take {
			break
		}
		b.WriteRune(r)
		*i++
		if end {
			break
		}
	}
	return b.String()
}

// RedactSetArg masks the values of the secret-like keys of a --set style argument
// (postgresql.auth.password=x -> postgresql.auth.password=<redacted>).
func RedactSetArg(arg string) string { return redactArg(arg) }

func redactArg(arg string) string {
	pairs := scanPairs(arg)
	changed := false
	for i, p := range pairs {
		if p.Value != "" && redact.IsSecretPath(strings.TrimSpace(p.Key)) {
			pairs[i].Value, changed = redact.Mask, true
		}
	}
	if !changed {
		return arg
	}
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p.Key
		if p.Assigned {
			parts[i] += "=" + p.Value
		}
	}
	return strings.Join(parts, ",")
}

// SetSecrets returns the values of the secret-like keys of --set style arguments, unescaped as
// Helm reads them, for a redact.Scrubber.
func SetSecrets(args []string) []string {
	var out []string
	for _, a := range args {
		for _, p := range scanPairs(a) {
			if p.Value != "" && redact.IsSecretPath(strings.TrimSpace(p.Key)) {
				out = append(out, p.Value, Unescape(p.Value))
			}
		}
	}
	return out
}

// Unescape removes strvals escapes (a\,b -> a,b).
func Unescape(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		if rs[i] == '\\' && i+1 < len(rs) {
			i++
		}
		b.WriteRune(rs[i])
	}
	return b.String()
}

// SetFilePair is a --set-file argument's pair: the key, and the path of the file whose content
// is its value.
type SetFilePair struct{ Key, Path string }

// SetFilePairs splits --set-file arguments into keys and paths (unescaped, as Helm reads
// them), refusing empty arguments and pairs without a key or a path.
func SetFilePairs(args []string) ([]SetFilePair, error) {
	var out []SetFilePair
	for _, a := range args {
		pairs, err := SplitSetArg(a)
		if err != nil {
			return nil, fmt.Errorf("--set-file %q: %v", a, err)
		}
		for _, p := range pairs {
			if !p.Assigned || strings.TrimSpace(p.Value) == "" {
				return nil, fmt.Errorf("--set-file %q: want key=path", a)
			}
			out = append(out, SetFilePair{Key: p.Key, Path: Unescape(p.Value)})
		}
	}
	return out, nil
}
