package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/stretchr/testify/require"
)

var (
	// testName is a test, fuzz target, example or benchmark as prose names it.
	testName = regexp.MustCompile(`\b(?:Test|Fuzz|Example|Benchmark)[A-Z][A-Za-z0-9_]*`)
	// testDecl is one declared in a _test.go file.
	testDecl = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Example|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)
	// goPath is a source file named in backquotes: `state/busy.go`.
	goPath = regexp.MustCompile("`([a-z][a-z0-9_]*(?:/[A-Za-z0-9_.-]+)+\\.go)`")
)

// root is the module's root: the nearest directory above with a go.mod.
func root(t *testing.T) string {
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

// sources walks the module and returns the tests declared in it and the
// doc.go files, each path relative to root.
func sources(t *testing.T, root string) (declared map[string]bool, docs []string) {
	declared = map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(path, "_test.go"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range testDecl.FindAllSubmatch(b, -1) {
				declared[string(m[1])] = true
			}
		case d.Name() == "doc.go":
			docs = append(docs, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return declared, docs
}

// TestDocumentsNameWhatExists reads README.md, CORRECTNESS.md and every
// doc.go: each test they name must be declared somewhere in the module,
// and each source file they name in backquotes must exist.
func TestDocumentsNameWhatExists(t *testing.T) {
	root := root(t)
	declared, docs := sources(t, root)
	require.NotEmpty(t, declared, "no tests found under %s", root)
	files := append([]string{"README.md", "CORRECTNESS.md"}, docs...)
	slices.Sort(files)
	named := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for _, n := range testName.FindAll(b, -1) {
			named++
			if !declared[string(n)] {
				t.Errorf("%s names %s, which no _test.go file declares", f, n)
			}
		}
		for _, m := range goPath.FindAllSubmatch(b, -1) {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(string(m[1])))); err != nil {
				t.Errorf("%s names %s, which does not exist", f, m[1])
			}
		}
	}
	// The documents name many tests; none found means the pattern broke.
	require.Greater(t, named, 50, "the documents name %d tests", named)
}

// TestEveryPlantedBugIsInTheCanaryTable: README's canary table says which
// check catches each planted bug, and in how many seeds; a bug planted
// without its line there fails.
func TestEveryPlantedBugIsInTheCanaryTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "README.md"))
	require.NoError(t, err)
	names := bugs.Names()
	require.NotEmpty(t, names)
	for _, n := range names {
		if !regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(n) + "` \\|").Match(b) {
			t.Errorf("README.md's canary table has no line for the planted bug %s", n)
		}
	}
}

// TestCitedRegressionsAreReplayed: a replay line the documents call a
// regression ("regression `statesim -seed N ...`") is a line of the
// simulator's regression file, flags and all, so `go test ./sim` replays
// the very run the text cites.
func TestCitedRegressionsAreReplayed(t *testing.T) {
	root := root(t)
	b, err := os.ReadFile(filepath.Join(root, "sim", "testdata", "regressions.txt"))
	require.NoError(t, err)
	replayed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line, _, _ = strings.Cut(line, "#"); strings.TrimSpace(line) != "" {
			replayed[strings.Join(strings.Fields(line), " ")] = true
		}
	}
	cited := regexp.MustCompile("regressions? \\(?`statesim((?:\\s+-[a-z]+(?:\\s+-?[0-9][0-9.]*)?)+)`")
	n := 0
	for _, f := range []string{"README.md", "CORRECTNESS.md"} {
		doc, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for _, m := range cited.FindAllSubmatch(doc, -1) {
			n++
			if line := strings.Join(strings.Fields(string(m[1])), " "); !replayed[line] {
				t.Errorf("%s cites the regression `statesim %s`, which is no line of sim/testdata/regressions.txt", f, line)
			}
		}
	}
	// The documents cite many; none found means the pattern broke.
	require.Greater(t, n, 10, "the documents cite %d regressions", n)
}
