package main

import (
	"context"
	"crypto/subtle"
	"encoding/csv"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// tokenFile authenticates bearer tokens listed in a CSV file in
// kube-apiserver's --token-auth-file format (token,user,uid[,"g1,g2"]). Unlike
// kube-apiserver's, it re-reads the file when its size or modification time
// changes, so a test can revoke a token and issue a new one without a restart.
type tokenFile struct {
	path   string
	mu     sync.Mutex
	mtime  time.Time
	size   int64
	tokens map[string]*user.DefaultInfo
}

func newTokenFile(path string) (*tokenFile, error) {
	t := &tokenFile{path: path}
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// reload reads the file if it changed; the caller holds mu (or is the constructor).
func (t *tokenFile) reload() error {
	st, err := os.Stat(t.path)
	if err != nil {
		return err
	}
	if t.tokens != nil && st.ModTime().Equal(t.mtime) && st.Size() == t.size {
		return nil
	}
	f, err := os.Open(t.path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return fmt.Errorf("%s: %v", t.path, err)
	}
	tokens := map[string]*user.DefaultInfo{}
	for i, row := range rows {
		if len(row) < 3 || row[0] == "" {
			return fmt.Errorf("%s: line %d: want token,user,uid[,groups]", t.path, i+1)
		}
		u := &user.DefaultInfo{Name: row[1], UID: row[2]}
		if len(row) > 3 && row[3] != "" {
			u.Groups = strings.Split(row[3], ",")
		}
		tokens[row[0]] = u
	}
	t.tokens, t.mtime, t.size = tokens, st.ModTime(), st.Size()
	return nil
}

func (t *tokenFile) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		// A file being rewritten: keep answering from what was read last.
		fmt.Fprintln(os.Stderr, "kreflect-realapi-server: token file:", err)
	}
	for tok, u := range t.tokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1 {
			return &authenticator.Response{User: u}, true, nil
		}
	}
	return nil, false, nil
}
