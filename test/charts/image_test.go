package charts_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerfileCoversTheControllerBuild: the image build copies only what
// the Dockerfile names (and .dockerignore lets through), so every package
// and embedded file cmd/controller builds from must be under those paths.
// A new top-level directory imported by the controller would otherwise
// break the image build while every other test passes.
func TestDockerfileCoversTheControllerBuild(t *testing.T) {
	root := repoRoot(t)
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var copied []string
	builds := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[0] == "COPY" && !strings.HasPrefix(fields[1], "--from") {
			copied = append(copied, fields[1:len(fields)-1]...)
		}
		if strings.Contains(sc.Text(), "./cmd/controller") {
			builds = true
		}
	}
	if !builds {
		t.Fatal("the Dockerfile does not build ./cmd/controller")
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, l := range strings.Split(string(ignore), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(l), "!"); ok {
			allowed[strings.TrimSuffix(p, "/")] = true
		}
	}
	inContext := func(c string) bool {
		for a := range allowed {
			if c == a || strings.HasPrefix(c, a+"/") {
				return true
			}
		}
		return false
	}
	for _, c := range copied {
		if !inContext(strings.TrimSuffix(c, "/")) {
			t.Errorf("Dockerfile copies %s, which .dockerignore keeps out of the build context", c)
		}
	}
	inImage := func(rel string) bool {
		for _, c := range copied {
			c = strings.TrimSuffix(c, "/")
			if rel == c || strings.HasPrefix(rel, c+"/") {
				return true
			}
		}
		return false
	}
	for _, need := range []string{"go.mod", "go.sum"} {
		if !inImage(need) {
			t.Errorf("Dockerfile does not copy %s", need)
		}
	}
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .EmbedFiles}} {{$.Dir}}/{{.}}{{end}}{{end}}{{end}}`, "./cmd/controller")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, path := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if !inImage(filepath.ToSlash(rel)) {
			t.Errorf("cmd/controller builds from %s, which the Dockerfile does not copy", rel)
		}
	}
	if n < 10 {
		t.Fatalf("go list found only %d of the module's packages and embedded files", n)
	}
}
