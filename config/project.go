package config

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"regexp"
	"strings"
)

// projectPattern is the format of a project id (see ledger.ValidProject).
const projectPattern = `^[a-z0-9][a-z0-9._-]{0,99}$`

var projectRe = regexp.MustCompile(projectPattern)

// ValidProjectID reports whether id is a well-formed project id.
func ValidProjectID(id string) bool { return projectRe.MatchString(id) }

// ProjectIDFile is the file in a project's state directory (.cortexbuild/)
// that keeps the id of a project whose configuration sets no project:,
// written on first use so that the id never changes afterwards.
const ProjectIDFile = "project-id"

// NewProjectID returns a fresh id for a project rooted at root: the
// directory's name made readable (as [DeriveProjectID]) and 8 random hex
// digits, so that two projects at the same path on two machines (every
// container's /data) get different ids.
func NewProjectID(root string) string {
	b := make([]byte, 4)
	rand.Read(b) // never fails (crypto/rand)
	return projectSlug(filepath.Base(root)) + "-" + hex.EncodeToString(b)
}

// ProjectID returns the project's id: the project: key when set, else one
// derived from root, the project root (see [DeriveProjectID]).
func (f *File) ProjectID(root string) string {
	if f.Project != "" {
		return f.Project
	}
	return DeriveProjectID(root)
}

// DeriveProjectID returns the id of the project rooted at root, which must
// be an absolute path with its symbolic links resolved: the directory's
// name made readable (lower case, other characters as '-', at most 40) and
// the first 8 hex digits of the SHA-256 of the path, so that two projects
// in directories of the same name get different ids and a project's id does
// not depend on how its path was written.
func DeriveProjectID(root string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(root)))
	return projectSlug(filepath.Base(root)) + "-" + hex.EncodeToString(sum[:4])
}

// projectSlug turns a name into the readable part of a project id.
func projectSlug(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-._")
	if len(s) > 40 {
		s = strings.Trim(s[:40], "-._")
	}
	if s == "" {
		return "project"
	}
	return s
}
