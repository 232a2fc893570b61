package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// readmeMaxLines bounds README.md: a user's guide; the rest belongs to docs/.
const readmeMaxLines = 300

// pendingPages are linked before they land: written in another change of the same issue. A
// link to one is checked like any other once the file exists.
var pendingPages = map[string]bool{"docs/authentication.md": true}

func TestReadmeIsShort(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	n := strings.Count(string(b), "\n")
	assert.LessOrEqualf(t, n, readmeMaxLines, "README.md has %d lines: move the detail to a page under docs/", n)
}

// Every relative link of README.md and docs/*.md names a file that exists and, with #anchor, a
// heading of that file (GitHub's anchors).
func TestDocsLinksResolve(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages, "docs/ has no pages")
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, page)
		for _, l := range markdownLinks(string(b)) {
			target, anchor, _ := strings.Cut(l.target, "#")
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
			}
			fileRel, _ := filepath.Rel(root, file)
			if _, err := os.Stat(file); err != nil {
				if !pendingPages[filepath.ToSlash(fileRel)] {
					t.Errorf("%s:%d: link %q: %s does not exist", rel, l.line, l.target, fileRel)
				}
				continue
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", rel, l.line, l.target)
				continue
			}
			doc, err := os.ReadFile(file)
			require.NoError(t, err)
			if !headingAnchors(string(doc))[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", rel, l.line, l.target, fileRel, anchor)
			}
		}
	}
}

type mdLink struct {
	line   int
	target string
}

var (
	mdLinkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdCodeSpanRE = regexp.MustCompile("`[^`]*`")
)

// markdownLinks returns the relative link targets of a Markdown document, outside code blocks
// and code spans.
func markdownLinks(doc string) []mdLink {
	var links []mdLink
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLinkRE.FindAllStringSubmatch(mdCodeSpanRE.ReplaceAllString(l, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links = append(links, mdLink{line: n, target: target})
		}
	}
	return links
}

var anchorDropRE = regexp.MustCompile(`[^\p{L}\p{N} _-]`)

// headingAnchors returns the anchors GitHub gives the headings of a Markdown document: lower
// case, punctuation dropped, spaces as hyphens, a repeated one numbered -1, -2, ...
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(l, "#"))
		a := strings.ReplaceAll(anchorDropRE.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

func TestHeadingAnchors(t *testing.T) {
	a := headingAnchors("# Title\n## What `plan` shows\n```sh\n# a comment\n```\n### Exposing it: Ingress or Gateway API, with TLS\n## Title\n")
	for _, want := range []string{"title", "what-plan-shows", "exposing-it-ingress-or-gateway-api-with-tls", "title-1"} {
		assert.True(t, a[want], want)
	}
	assert.False(t, a["a-comment"], "a comment in a code block is no heading")
	links := markdownLinks("[a](b.md#c) `[x](y)` [web](https://example.com)\n```\n[in](code.md)\n```\n[d](#e)\n")
	assert.Equal(t, []mdLink{{1, "b.md#c"}, {5, "#e"}}, links)
}
