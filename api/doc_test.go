package api_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The package comment (doc.go) exists and every identifier it links
// ([Engine.Run], [*NameError], [github.com/quire-dev/quire/sim]) names
// something the package, or an import path, has: a rename that leaves
// the overview naming an API that is gone fails here.
func TestPackageDoc_LinksResolve(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/quire-dev/quire/api")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Doc, "Package api ") {
		t.Fatalf("the package comment is missing or does not start with \"Package api \": %q", p.Doc)
	}
	// A link the parser cannot resolve stays plain text, brackets and all.
	parsed := p.Parser().Parse(p.Doc)
	var links int
	var walk func(texts []comment.Text)
	walk = func(texts []comment.Text) {
		for _, x := range texts {
			switch x := x.(type) {
			case *comment.DocLink:
				links++
			case *comment.Link:
				walk(x.Text)
			}
		}
	}
	for _, b := range parsed.Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			walk(b.Text)
		case *comment.Heading:
			walk(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if para, ok := c.(*comment.Paragraph); ok {
						walk(para.Text)
					}
				}
			}
		}
	}
	var prose []string
	for _, b := range parsed.Content {
		if _, code := b.(*comment.Code); !code {
			prose = append(prose, string(p.Printer().Text(&comment.Doc{Content: []comment.Block{b}})))
		}
	}
	bracketed := regexp.MustCompile(`\[\*?[A-Za-z][A-Za-z0-9_./-]*\]`).FindAllString(strings.Join(prose, "\n"), -1)
	if len(bracketed) > 0 {
		t.Fatalf("the package comment links names the package does not have: %v", bracketed)
	}
	if links == 0 {
		t.Fatal("the package comment links nothing: a doc-link check that sees no links checks nothing")
	}
}
