// Package doccheck checks the repository's Markdown documents: every relative link resolves to
// a file that exists, and every anchor into a Markdown file names one of its headings.
package doccheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// skipDirs are not the project's documents: vendored sources, build and benchmark outputs.
var skipDirs = map[string]bool{".git": true, "third_party": true, "node_modules": true, "bin": true, "bench-results": true}

// link matches [text](target) and ![alt](target); the target stops at whitespace or ')'.
var link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

func TestRelativeLinksResolve(t *testing.T) {
	root := repoRoot(t)
	docs := markdownFiles(t, root)
	require.Contains(t, docs, filepath.Join(root, "README.md"))
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(t, path)
		anchors[path] = a
		return a
	}
	for _, doc := range docs {
		rel, _ := filepath.Rel(root, doc)
		for _, l := range links(t, doc) {
			target, anchor, _ := strings.Cut(l.target, "#")
			if target == "" { // an anchor in the same document
				if !anchorsOf(doc)[anchor] {
					t.Errorf("%s:%d: no heading for #%s in the same document", rel, l.line, anchor)
				}
				continue
			}
			path := filepath.Join(filepath.Dir(doc), filepath.FromSlash(target))
			if strings.HasPrefix(target, "/") {
				path = filepath.Join(root, filepath.FromSlash(target))
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s:%d: link to %s: no such file or directory", rel, l.line, l.target)
				continue
			}
			if anchor != "" && !info.IsDir() && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s:%d: link to %s: %s has no heading for #%s", rel, l.line, l.target, target, anchor)
			}
		}
	}
}

func TestHeadingAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Many hosts on one PostgreSQL":                 "many-hosts-on-one-postgresql",
		"Several hosts: the fan-in":                    "several-hosts-the-fan-in",
		"The `temporal` CLI":                           "the-temporal-cli",
		"Orphans: attempts a live worker does not run": "orphans-attempts-a-live-worker-does-not-run",
		"1. Packages":                                  "1-packages",
		"Overload (twice capacity)":                    "overload-twice-capacity",
	} {
		require.Equal(t, want, anchorOf(heading), heading)
	}
}

type docLink struct {
	target string
	line   int
}

// links returns the relative links of a Markdown file, outside fenced code blocks and inline
// code.
func links(t *testing.T, path string) []docLink {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []docLink
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(stripInlineCode(line), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, docLink{target: target, line: n})
		}
	}
	require.NoError(t, s.Err())
	return out
}

// stripInlineCode removes `code spans`, whose brackets are not links.
func stripInlineCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown file (a repeated
// heading gets -1, -2, ...).
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := anchorOf(heading)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// anchorOf is GitHub's anchor for a heading: lower case, letters, digits, '-' and '_' kept,
// spaces turned into '-', everything else dropped.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			out = append(out, path)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}
