package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"

	"github.com/cortexbuild/cortexbuild/internal/atomicfile"
	"github.com/cortexbuild/cortexbuild/internal/filepoll"
)

// SecretsFileName is the file, in the project's .cortexbuild/ directory,
// that holds provider credentials saved from the web console.
const SecretsFileName = "secrets.json"

// CredentialSource supplies provider credentials that are neither written
// in the configuration nor set in the environment: [File.Resolve] asks it
// last. *SecretsFile implements it.
type CredentialSource interface {
	// Credential returns the value saved for a provider instance's
	// credential field, and whether there is one. An error means the
	// source cannot be read (it never contains a value).
	Credential(providerName, field string) (string, bool, error)
}

// SecretsFile keeps provider credentials in a JSON file with mode 0600,
// by provider instance name and credential field. It refuses to read a
// file that others can read. Every method is safe for concurrent use
// within a process; writes replace the file atomically.
type SecretsFile struct {
	path string
	mu   sync.Mutex

	// What [SecretsFile.Changed] compares with; guarded by mu.
	poll    filepoll.Throttle
	stamp   fileStamp
	stamped bool
	wrote   bool // Set wrote the file since Changed last looked
}

// fileStamp is what tells one version of the file from another without
// reading it: the file itself (a replacement is a new inode), its size,
// modification time and mode, or the error of looking at it.
type fileStamp struct {
	info os.FileInfo
	err  string
}

func (a fileStamp) same(b fileStamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil && a.err == b.err
	}
	return os.SameFile(a.info, b.info) && a.info.ModTime().Equal(b.info.ModTime()) && a.info.Size() == b.info.Size() && a.info.Mode() == b.info.Mode()
}

type secretsDoc struct {
	Version   int                          `json:"version"`
	Providers map[string]map[string]string `json:"providers"`
}

// OpenSecretsFile returns the secrets file at path; it need not exist yet.
func OpenSecretsFile(path string) *SecretsFile { return &SecretsFile{path: path} }

// SetRecheck bounds how often [SecretsFile.Changed] looks at the file: a
// change another process (or an editor) makes is seen at most d later.
// Zero (the default) looks on every call; 'cortexbuild serve' uses a
// fraction of a second. Changes made through s are seen at once.
func (s *SecretsFile) SetRecheck(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.poll.Every = d
}

// Changed reports whether the file may hold other credentials than when
// Changed last looked: saved through s, or written, replaced, removed or
// made readable by others outside this process. The first call records
// the file's state and reports false. It reads no credential.
func (s *SecretsFile) Changed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wrote && s.stamped && !s.poll.Due() {
		return false
	}
	s.wrote = false
	var st fileStamp
	if info, err := os.Stat(s.path); err == nil {
		st.info = info
	} else if !errors.Is(err, fs.ErrNotExist) {
		st.err = err.Error()
	}
	if s.stamped && st.same(s.stamp) {
		return false
	}
	first := !s.stamped
	s.stamp, s.stamped = st, true
	return !first
}

// Path is the file's path.
func (s *SecretsFile) Path() string { return s.path }

// read loads the file; a missing file is empty. The caller holds s.mu.
func (s *SecretsFile) read() (secretsDoc, error) {
	doc := secretsDoc{Version: 1, Providers: map[string]map[string]string{}}
	data, _, err := atomicfile.ReadPrivate(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return doc, fmt.Errorf("secrets file: %w", err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		// The decoder's message may quote the file's content: leave it out.
		return doc, fmt.Errorf("secrets file: %s is not valid JSON", s.path)
	}
	if doc.Version != 1 {
		return doc, fmt.Errorf("secrets file: %s has version %d; this build reads version 1", s.path, doc.Version)
	}
	if doc.Providers == nil {
		doc.Providers = map[string]map[string]string{}
	}
	return doc, nil
}

// Credential implements [CredentialSource].
func (s *SecretsFile) Credential(providerName, field string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	doc, err := s.read()
	if err != nil {
		return "", false, err
	}
	v, ok := doc.Providers[providerName][field]
	return v, ok && v != "", nil
}

// Fields returns the names of the fields saved for a provider, sorted.
func (s *SecretsFile) Fields(providerName string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	doc, err := s.read()
	if err != nil {
		return nil, err
	}
	var out []string
	for k, v := range doc.Providers[providerName] {
		if v != "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Set saves value for a provider's credential field; an empty value
// removes the field. The file is written with mode 0600, atomically,
// holding the lock file beside it (secrets.json.lock, see
// [atomicfile.Locked]) from the read to the write, so that no other
// process's saved credential is lost.
func (s *SecretsFile) Set(providerName, field, value string) error {
	if providerName == "" || field == "" {
		return errors.New("secrets file: a provider and a field are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := atomicfile.Target(s.path)
	err := atomicfile.Locked(path, 0o755, func() error {
		doc, err := s.read()
		if err != nil {
			return err
		}
		if value == "" {
			delete(doc.Providers[providerName], field)
			if len(doc.Providers[providerName]) == 0 {
				delete(doc.Providers, providerName)
			}
		} else {
			if doc.Providers[providerName] == nil {
				doc.Providers[providerName] = map[string]string{}
			}
			doc.Providers[providerName][field] = value
		}
		data, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return fmt.Errorf("secrets file: %w", err)
		}
		if err := atomicfile.Write(path, append(data, '\n'), 0o755); err != nil {
			return fmt.Errorf("secrets file: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.wrote = true
	return nil
}

// Where a credential's value comes from, as [File.CredentialStates] says.
const (
	SourceNone        = ""
	SourceConfig      = "config"       // a literal in llm-config.yaml
	SourceEnv         = "env"          // an environment variable
	SourceSecretsFile = "secrets_file" // the secrets file
)

// CredentialState says whether one credential field of a provider is set
// and where its value comes from. It never carries the value.
type CredentialState struct {
	Field provider.CredentialField
	// Required says whether the provider needs it (for its profile).
	Required bool
	// Set reports whether a value was found.
	Set bool
	// Source is one of the Source constants; EnvVar names the variable
	// for SourceEnv, and the variable a ${VAR} reference in the file
	// names even when it is unset.
	Source string
	EnvVar string
	// EnvVars are the schema's variables this provider may read: none
	// unless it talks to the vendor's own endpoint
	// ([provider.Registration.EnvVarsFor]).
	EnvVars []string
}

// CredentialStates reports, for each field of a configured provider's
// credentials schema, whether it is set and where from, in the order
// [File.Resolve] looks: the file (a literal or a ${VAR} reference), the
// schema's environment variables, then f.Secrets. Values are never
// returned.
func (f *File) CredentialStates(name string, reg *provider.Registry, lookup func(string) (string, bool)) ([]CredentialState, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	p, ok := f.Providers[name]
	if !ok {
		return nil, fmt.Errorf("provider %q is not configured", name)
	}
	r, err := reg.Lookup(p.Type)
	if err != nil {
		return nil, err
	}
	var out []CredentialState
	var srcErr error
	for _, field := range r.Credentials {
		st := CredentialState{Field: field, Required: field.RequiredFor(p.Profile), EnvVars: r.EnvVarsFor(field, p.Profile, p.BaseURL)}
		if sec, ok := p.Credentials[field.Name]; ok {
			st.EnvVar = sec.EnvVar()
			if st.EnvVar == "" {
				st.Set, st.Source = true, SourceConfig
			} else if v, ok := lookup(st.EnvVar); ok && v != "" {
				st.Set, st.Source = true, SourceEnv
			}
		} else {
			for _, env := range st.EnvVars {
				if v, ok := lookup(env); ok && v != "" {
					st.Set, st.Source, st.EnvVar = true, SourceEnv, env
					break
				}
			}
		}
		if !st.Set && f.Secrets != nil {
			_, ok, err := f.Secrets.Credential(name, field.Name)
			if err != nil {
				srcErr = err
			} else if ok {
				st.Set, st.Source = true, SourceSecretsFile
			}
		}
		out = append(out, st)
	}
	return out, srcErr
}
