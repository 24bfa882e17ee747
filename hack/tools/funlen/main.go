// Command funlen is `make lint`'s function-length rule: no product function
// longer than -lines lines (tests and generated files aside), except those
// named with a reason in the -exceptions file ("<package path>.<function>
// <reason>" per line; # starts a comment).
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"os"
	"strings"

	"github.com/ultraware/funlen"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/singlechecker"
)

// Set by the analyzer's flags (-funlen.lines is not needed: the driver
// exposes an analyzer's flags by their own names in a single checker).
var (
	lines      int
	exceptions string
)

func main() {
	a := &analysis.Analyzer{
		Name: "funlen",
		Doc:  "Reports product functions longer than -lines lines (github.com/ultraware/funlen), tests, generated files and named exceptions aside.",
		Run:  run,
	}
	a.Flags.IntVar(&lines, "lines", 80, "longest function allowed, in lines")
	a.Flags.StringVar(&exceptions, "exceptions", "", "file naming the functions allowed to be longer, each with its reason")
	singlechecker.Main(a)
}

func run(pass *analysis.Pass) (any, error) {
	allowed, err := readExceptions(exceptions)
	if err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	for _, f := range pass.Files {
		name := pass.Fset.File(f.Pos()).Name()
		if strings.HasSuffix(name, "_test.go") || ast.IsGenerated(f) {
			skip[name] = true
		}
	}
	inner := funlen.NewAnalyzer(lines, -1, false)
	p := *pass
	p.Report = func(d analysis.Diagnostic) {
		if skip[pass.Fset.File(d.Pos).Name()] {
			return
		}
		for fn := range allowed {
			if strings.HasPrefix(fn, pass.Pkg.Path()+".") && strings.Contains(d.Message, "'"+strings.TrimPrefix(fn, pass.Pkg.Path()+".")+"'") {
				return
			}
		}
		pass.Report(d)
	}
	return inner.Run(&p)
}

// readExceptions reads "<package path>.<function> <reason>" lines; a line
// without a reason is an error, so every exception says why.
func readExceptions(path string) (map[string]string, error) {
	out := map[string]string{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading funlen exceptions: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fn, reason, ok := strings.Cut(line, " ")
		if !ok || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: %q names no reason", path, n, line)
		}
		out[fn] = strings.TrimSpace(reason)
	}
	return out, sc.Err()
}
