package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveTokenTakesTheFirstGivenOfFlagFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(" from-file \r\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\nx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                     string
		flag                     string
		flagGiven                bool
		file, env, want, wantErr string
	}{
		{name: "flag wins", flag: "from-flag", flagGiven: true, file: file, env: "from-env", want: "from-flag"},
		{name: "-token '' sends none", flagGiven: true, file: file, env: "from-env", want: ""},
		{name: "file before env", file: file, env: "from-env", want: "from-file"},
		{name: "env", env: " from-env\n", want: "from-env"},
		{name: "none", want: ""},
		{name: "missing file", file: filepath.Join(dir, "nope"), wantErr: "-token-file (env EVORA_TOKEN_FILE): cannot read " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{name: "empty first line", file: empty, wantErr: "the first line of " + empty + " is empty"},
		{name: "not a header value", env: "tök en", wantErr: "the token from EVORA_TOKEN must be printable ASCII without spaces"},
	}
	for _, c := range cases {
		got, err := resolveToken(c.flag, c.flagGiven, c.file, c.env)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: err = %v, want one line containing %q", c.name, err, c.wantErr)
			}
		case err != nil || got != c.want:
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
