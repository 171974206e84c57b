package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// docs/configuration.md is the one table of every name: each flag of tern
// serve and of the commands that reach a server or a data directory, each
// key of the config file, and each TERN_* variable that tern or the Milvus
// backend reads is in it.
func TestConfigurationTableHasEveryName(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "|") {
			table.WriteString(line)
		}
	}
	doc := table.String()
	missing := func(what, name string) {
		t.Helper()
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/configuration.md's table lacks the %s `%s`", what, name)
		}
	}
	a := &app{getenv: noEnv}
	root := a.rootCmd()
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{"help": true, "config": true, "print-config": true, "dir": true}
	serve.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if !skip[f.Name] {
			missing("flag of tern serve", "--"+f.Name)
		}
	})
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !skip[f.Name] {
			missing("flag of every command", "--"+f.Name)
		}
	})
	for _, k := range configKeys {
		missing("config file key", k)
	}
	vars := regexp.MustCompile(`"(TERN_[A-Z_]+)"`)
	files, _ := filepath.Glob("*.go")
	files = append(files, "../../contrib/milvus/env.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range vars.FindAllStringSubmatch(string(src), -1) {
			missing("variable read in "+f, m[1])
		}
	}
}
