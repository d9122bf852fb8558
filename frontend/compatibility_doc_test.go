package frontend_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestCompatibilityDocIsCurrent keeps docs/compatibility.md true: every RPC of WorkflowService
// and OperatorService is listed once, as served exactly when the frontend implements it.
func TestCompatibilityDocIsCurrent(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "compatibility.md"))
	require.NoError(t, err)
	implemented := handlerMethods(t)

	for _, svc := range []struct {
		title    string
		desc     protoreflect.ServiceDescriptor
		receiver func(string) bool
	}{
		{"WorkflowService", workflowservice.File_temporal_api_workflowservice_v1_service_proto.Services().Get(0),
			func(r string) bool { return r == "WorkflowHandler" }},
		{"OperatorService", operatorservice.File_temporal_api_operatorservice_v1_service_proto.Services().Get(0),
			func(r string) bool { return strings.Contains(r, "Operator") }},
	} {
		t.Run(svc.title, func(t *testing.T) {
			rows := docRows(t, string(doc), svc.title)
			for i := 0; i < svc.desc.Methods().Len(); i++ {
				name := string(svc.desc.Methods().Get(i).Name())
				status, ok := rows[name]
				require.True(t, ok, "docs/compatibility.md does not list %s.%s", svc.title, name)
				delete(rows, name)
				served := false
				for _, r := range implemented[name] {
					served = served || svc.receiver(r)
				}
				if served {
					require.Equal(t, "served", status, "%s.%s is implemented: the doc should say served", svc.title, name)
				} else {
					require.Equal(t, "Unimplemented", status, "%s.%s is not implemented: the doc should say Unimplemented", svc.title, name)
				}
			}
			require.Empty(t, rows, "docs/compatibility.md lists RPCs %s does not have", svc.title)
		})
	}
}

var docRow = regexp.MustCompile("^\\| `([A-Za-z]+)` \\| (served|Unimplemented) \\|")

// docRows reads the table under the heading "### title": RPC name → status.
func docRows(t *testing.T, doc, title string) map[string]string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "### "+title+"\n")
	require.True(t, ok, "docs/compatibility.md has no section %q", title)
	section, _, _ = strings.Cut(section, "\n### ")
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if m := docRow.FindStringSubmatch(line); m != nil {
			_, dup := rows[m[1]]
			require.False(t, dup, "%s listed twice", m[1])
			rows[m[1]] = m[2]
		}
	}
	return rows
}

// handlerMethods are the exported methods declared in the frontend package: name → receivers.
func handlerMethods(t *testing.T) map[string][]string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	require.NoError(t, err)
	out := map[string][]string{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Recv == nil || !fn.Name.IsExported() {
					continue
				}
				recv := fn.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					out[fn.Name.Name] = append(out[fn.Name.Name], id.Name)
				}
			}
		}
	}
	return out
}
