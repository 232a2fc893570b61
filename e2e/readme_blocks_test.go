package e2e

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// demoMarker starts a README comment that marks the next code block as commands to run on the
// demo cluster: <!-- demo-commands --> (every command exits 0) or <!-- demo-commands exit=3 -->.
const demoMarker = "<!-- demo-commands"

// demoBlock is one marked code block of the README or of a page under docs/.
type demoBlock struct {
	Doc  string // the document, for messages
	Line int    // of the opening fence, for messages
	Lang string // sh: a script, run as one; console: the "$ " lines are the commands
	Body string
	Exit int // expected exit code of each console command
}

// Commands are a console block's commands ("$ " lines, with their "\" continuation lines).
func (b demoBlock) Commands() []string {
	var cmds []string
	cont := false
	for _, l := range strings.Split(b.Body, "\n") {
		switch {
		case cont:
			cmds[len(cmds)-1] += "\n" + l
		case strings.HasPrefix(l, "$ "):
			cmds = append(cmds, strings.TrimPrefix(l, "$ "))
		default:
			continue
		}
		cont = strings.HasSuffix(l, `\`)
	}
	return cmds
}

var markerExitRE = regexp.MustCompile(`exit=(\d+)`)

// parseDemoBlocks returns the README's marked code blocks in order.
func parseDemoBlocks(readme string) ([]demoBlock, error) {
	var blocks []demoBlock
	sc := bufio.NewScanner(strings.NewReader(readme))
	n, marked, exit := 0, false, 0
	var cur *demoBlock
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case cur != nil && strings.HasPrefix(l, "```"):
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.Body += l + "\n"
		case strings.HasPrefix(l, demoMarker):
			marked, exit = true, 0
			if m := markerExitRE.FindStringSubmatch(l); m != nil {
				exit, _ = strconv.Atoi(m[1])
			}
		case marked && strings.HasPrefix(l, "```"):
			lang := strings.TrimPrefix(l, "```")
			if lang != "sh" && lang != "console" {
				return nil, fmt.Errorf("README line %d: a %s block is marked %s...: mark sh or console blocks", n, demoMarker, lang)
			}
			cur, marked = &demoBlock{Line: n, Lang: lang, Exit: exit}, false
		case marked && strings.TrimSpace(l) != "":
			return nil, fmt.Errorf("README line %d: %s...--> must be followed by a code block", n, demoMarker)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("README line %d: code block not closed", cur.Line)
	}
	return blocks, sc.Err()
}

func TestParseDemoBlocks(t *testing.T) {
	md := "intro\n<!-- demo-commands -->\n```sh\na\nb # c\n```\n```sh\nnot marked\n```\n" +
		"<!-- demo-commands exit=3 -->\n\n```console\n$ x \\\n    --y\nout\n$ z\n```\n"
	blocks, err := parseDemoBlocks(md)
	require.NoError(t, err)
	require.Len(t, blocks, 2)
	assert.Equal(t, demoBlock{Line: 3, Lang: "sh", Body: "a\nb # c\n"}, blocks[0])
	assert.Equal(t, 3, blocks[1].Exit)
	assert.Equal(t, []string{"x \\\n    --y", "z"}, blocks[1].Commands())
	_, err = parseDemoBlocks("<!-- demo-commands -->\ntext\n```sh\n```\n")
	assert.ErrorContains(t, err, "must be followed by a code block")
}
