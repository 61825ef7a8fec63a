package arch

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// rule says what one package may import and which bans apply to its files.
type rule struct {
	// quire lists the module packages it may import, relative to the module
	// root: "x" is x alone, "x/..." is x and everything under it, "*" is
	// every package.
	quire []string
	// quireDeny takes packages back out of quire (used with "*").
	quireDeny []string
	// third lists the third-party import paths it may import, each with its
	// subpackages.
	third []string
	// stdlib, when non-nil, is the only standard library its non-test files
	// may import. Nil allows all of it.
	stdlib []string
	// pure applies the bans on clock reads, global randomness and go
	// statements to its non-test files whose names match pureFiles
	// (path.Match), or to all of them when pureFiles is empty.
	pure      bool
	pureFiles string
	// durable bans the pebble options that skip or defer the WAL sync.
	durable bool
	// systemClock allows calling clock.System.
	systemClock bool
}

// bannedTime are the functions of package time that read the wall clock or
// start a real timer.
var bannedTime = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"Tick": true, "NewTimer": true, "AfterFunc": true, "NewTicker": true,
}

// allowedRand are the names of math/rand and math/rand/v2 that pure code may
// use: types and constructors of sources that the caller seeds. Everything
// else there draws from the global source.
var allowedRand = map[string]bool{
	"Rand": true, "Source": true, "New": true, "NewSource": true,
	"PCG": true, "NewPCG": true, "ChaCha8": true, "NewChaCha8": true,
	"Zipf": true, "NewZipf": true,
}

// bannedULID are the ulid functions that take time or entropy from globals.
var bannedULID = map[string]bool{"Make": true, "Now": true, "DefaultEntropy": true}

// bannedDurable are the identifiers by which a pebble write or store skips
// or defers the WAL sync (spec/reliability.md §2.2).
var bannedDurable = map[string]bool{"NoSync": true, "ApplyNoSyncWait": true, "DisableWAL": true}

// violation is one broken rule at one place.
type violation struct {
	file string // relative to the module root
	line int    // 0 when the violation is about the whole package
	rule string // imports, table, wall-clock, global-rand, entropy, go-stmt, no-sync, system-clock
	msg  string
}

// pos is file:line, or file alone for a package-wide violation.
func (v violation) pos() string {
	if v.line == 0 {
		return v.file
	}
	return v.file + ":" + strconv.Itoa(v.line)
}

func (v violation) String() string { return v.pos() + ": [" + v.rule + "] " + v.msg }

// check parses every Go file of the module rooted at fsys (its go.mod names
// the module) and returns the violations of rules, sorted by position.
// Directories named testdata or vendor, starting with "." or "_", or holding
// another module are skipped, as the go tool skips them.
func check(fsys fs.FS, rules map[string]rule, testExtras rule) ([]violation, error) {
	mod, err := modulePath(fsys)
	if err != nil {
		return nil, err
	}
	dirs := map[string][]string{} // package dir -> its .go files
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == "." {
				return nil
			}
			name := d.Name()
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return fs.SkipDir
			}
			if _, err := fs.Stat(fsys, path.Join(p, "go.mod")); err == nil {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			dirs[path.Dir(p)] = append(dirs[path.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no Go files under the root of %s", mod)
	}

	c := &checker{fset: token.NewFileSet(), mod: mod, rules: rules, testExtras: testExtras}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if err := c.checkPackage(fsys, dir, dirs[dir]); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(c.out, func(a, b violation) int {
		return cmp.Or(strings.Compare(a.file, b.file), cmp.Compare(a.line, b.line),
			strings.Compare(a.rule, b.rule), strings.Compare(a.msg, b.msg))
	})
	return c.out, nil
}

func modulePath(fsys fs.FS) (string, error) {
	b, err := fs.ReadFile(fsys, "go.mod")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("go.mod: no module line")
}

type checker struct {
	fset       *token.FileSet
	mod        string
	rules      map[string]rule
	testExtras rule
	out        []violation
}

func (c *checker) report(pos token.Pos, ruleName, format string, args ...any) {
	p := c.fset.Position(pos)
	c.out = append(c.out, violation{
		file: p.Filename,
		line: p.Line,
		rule: ruleName,
		msg:  fmt.Sprintf(format, args...),
	})
}

func (c *checker) checkPackage(fsys fs.FS, dir string, files []string) error {
	r, ok := ruleFor(c.rules, dir)
	if !ok {
		slices.Sort(files)
		c.out = append(c.out, violation{
			file: files[0],
			rule: "table",
			msg: fmt.Sprintf("package %s has no row in the import table: add it to DESIGN §2 "+
				"and to rules in internal/arch/arch_test.go", dir),
		})
		return nil
	}
	for _, name := range files {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		// Mode 0 keeps object resolution, which tells a local variable
		// named rand or time from the package of that name.
		f, err := parser.ParseFile(c.fset, name, src, 0)
		if err != nil {
			return err
		}
		c.checkFile(dir, r, name, f)
	}
	return nil
}

// ruleFor returns the row for the package in dir: an exact row, else the
// longest "x/..." row covering it, else the helper row (nothing but the
// standard library) for a package under internal/ without a row.
func ruleFor(rules map[string]rule, dir string) (rule, bool) {
	if r, ok := row(rules, dir); ok {
		return r, true
	}
	if isHelper(rules, dir) {
		return rule{}, true
	}
	return rule{}, false
}

func row(rules map[string]rule, dir string) (rule, bool) {
	if r, ok := rules[dir]; ok {
		return r, true
	}
	best := ""
	for k := range rules {
		if strings.HasSuffix(k, "/...") && matchPkg(k, dir) && len(k) > len(best) {
			best = k
		}
	}
	r, ok := rules[best]
	return r, ok
}

// isHelper reports whether dir is an internal helper package, which anyone
// may import: under internal/ and without a row of its own.
func isHelper(rules map[string]rule, dir string) bool {
	_, hasRow := row(rules, dir)
	return strings.HasPrefix(dir, "internal/") && !hasRow
}

func matchPkg(pattern, rel string) bool {
	if pattern == "*" {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == p || strings.HasPrefix(rel, p+"/")
	}
	return rel == pattern
}

func matchPath(prefix, imp string) bool {
	return imp == prefix || strings.HasPrefix(imp, prefix+"/")
}

// allowedQuire reports whether package from (with row r) may import the
// module package to, and if not, what it may import.
func allowedQuire(rules map[string]rule, r, extras rule, from, to string, isTest bool) (bool, string) {
	if to == from || isHelper(rules, to) {
		return true, ""
	}
	allow := r.quire
	if isTest {
		allow = append(slices.Clip(allow), extras.quire...)
	}
	for _, d := range r.quireDeny {
		if matchPkg(d, to) {
			return false, describe(allow, r.quireDeny)
		}
	}
	for _, a := range allow {
		if matchPkg(a, to) {
			return true, ""
		}
	}
	return false, describe(allow, r.quireDeny)
}

func describe(allow, deny []string) string {
	if len(allow) == 0 {
		return "no quire package"
	}
	s := strings.Join(allow, ", ")
	if len(deny) > 0 {
		s += " except " + strings.Join(deny, ", ")
	}
	return s
}

var versionElem = regexp.MustCompile(`^v[0-9]+$`)

// defaultName is the name an import binds without an explicit one, by the
// convention that a package is named after its last path element,
// skipping a major-version element.
func defaultName(imp string) string {
	elems := strings.Split(imp, "/")
	name := elems[len(elems)-1]
	if versionElem.MatchString(name) && len(elems) > 1 {
		name = elems[len(elems)-2]
	}
	return name
}

func (c *checker) checkFile(dir string, r rule, name string, f *ast.File) {
	isTest := strings.HasSuffix(name, "_test.go")
	pure := r.pure && !isTest
	if pure && r.pureFiles != "" {
		pure, _ = path.Match(r.pureFiles, path.Base(name))
	}

	// local maps the names this file binds to import paths of interest.
	local := map[string]string{}
	for _, spec := range f.Imports {
		imp, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		c.checkImport(dir, r, isTest, pure, spec, imp)
		bound := defaultName(imp)
		if spec.Name != nil {
			bound = spec.Name.Name
		}
		if bound == "." && pure && (imp == "time" || imp == "math/rand" || imp == "math/rand/v2") {
			c.report(spec.Pos(), "wall-clock", "dot import of %s in pure package %s hides what it calls", imp, dir)
		}
		local[bound] = imp
	}

	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			if pure {
				c.report(n.Pos(), "go-stmt", "go statement in pure package %s: "+
					"return what to do and let the runner start goroutines (STYLE rule 1)", dir)
			}
		case *ast.Ident:
			if r.durable && !isTest && bannedDurable[n.Name] {
				c.report(n.Pos(), "no-sync", "%s skips or defers the WAL sync: "+
					"commit with pebble.Sync (spec/reliability.md §2.2)", n.Name)
			}
		case *ast.SelectorExpr:
			x, ok := n.X.(*ast.Ident)
			if !ok || x.Obj != nil { // not a package, or a local shadowing one
				return true
			}
			c.checkSelector(dir, r, isTest, pure, local[x.Name], x.Name, n.Sel)
		}
		return true
	})
}

func (c *checker) checkImport(dir string, r rule, isTest, pure bool, spec *ast.ImportSpec, imp string) {
	switch {
	case imp == c.mod || strings.HasPrefix(imp, c.mod+"/"):
		to := strings.TrimPrefix(strings.TrimPrefix(imp, c.mod), "/")
		if to == "" {
			to = "."
		}
		if ok, allowed := allowedQuire(c.rules, r, c.testExtras, dir, to, isTest); !ok {
			c.report(spec.Pos(), "imports", "%s imports %s; its row in DESIGN §2 allows %s", dir, to, allowed)
		}
	case !strings.Contains(strings.Split(imp, "/")[0], "."): // standard library
		if pure && imp == "crypto/rand" {
			c.report(spec.Pos(), "entropy", "pure package %s imports crypto/rand: "+
				"take entropy as an io.Reader parameter (STYLE rule 3)", dir)
		}
		if r.stdlib != nil && !isTest && !slices.Contains(r.stdlib, imp) {
			c.report(spec.Pos(), "imports", "%s imports %s; its row in DESIGN §2 allows only %s of the standard library",
				dir, imp, strings.Join(r.stdlib, ", "))
		}
	default:
		allow := r.third
		if isTest {
			allow = append(slices.Clip(allow), c.testExtras.third...)
		}
		if !slices.ContainsFunc(allow, func(p string) bool { return matchPath(p, imp) }) {
			list := "no third-party package"
			if len(allow) > 0 {
				list = strings.Join(allow, ", ")
			}
			c.report(spec.Pos(), "imports", "%s imports %s; its row in DESIGN §2 allows %s", dir, imp, list)
		}
	}
}

func (c *checker) checkSelector(dir string, r rule, isTest, pure bool, imp, name string, sel *ast.Ident) {
	switch {
	case imp == "":
		return
	case imp == c.mod+"/clock" && sel.Name == "System":
		if !isTest && !r.systemClock && dir != "clock" {
			c.report(sel.Pos(), "system-clock", "%s calls clock.System; only api does (DESIGN §1.3): take a clock.Clock", dir)
		}
	case !pure:
		return
	case imp == "time" && bannedTime[sel.Name]:
		c.report(sel.Pos(), "wall-clock", "%s.%s in pure package %s reads the wall clock: "+
			"take now as an argument or the instant from the record (DESIGN §1.3)", name, sel.Name, dir)
	case (imp == "math/rand" || imp == "math/rand/v2") && !allowedRand[sel.Name]:
		c.report(sel.Pos(), "global-rand", "%s.%s in pure package %s draws from the global source: "+
			"use a *rand.Rand the caller seeds (STYLE rule 3)", name, sel.Name, dir)
	case matchPath(ulid, imp) && bannedULID[sel.Name]:
		c.report(sel.Pos(), "entropy", "%s.%s in pure package %s takes time or entropy from globals: "+
			"use ulid.New with an injected instant and reader (STYLE rule 3)", name, sel.Name, dir)
	}
}
