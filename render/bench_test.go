package render

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkRender loads the ten built-in personas and the built-in rule and
// renders them for the four hosts, in memory.
func BenchmarkRender(b *testing.B) {
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		src, err := LoadSources(dir)
		if err != nil {
			b.Fatal(err)
		}
		files, err := Render(src, nil)
		if err != nil || len(files) != 43 {
			b.Fatalf("%d files, %v", len(files), err)
		}
	}
}

// BenchmarkRenderCold is a first render into an empty project: load, render,
// compare with the (empty) disk, write 43 files and the manifest.
func BenchmarkRenderCold(b *testing.B) {
	root := b.TempDir()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(root, "p"+strconv.Itoa(i))
		i++
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		p, err := NewPlan(Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Apply(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderCheck is --check on an up-to-date project: load, render,
// read and hash every file.
func BenchmarkRenderCheck(b *testing.B) {
	dir := b.TempDir()
	p, err := NewPlan(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Apply(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := NewPlan(Options{Dir: dir})
		if err != nil || !p.UpToDate() {
			b.Fatalf("not up to date: %v", err)
		}
	}
}
