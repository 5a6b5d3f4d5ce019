// Package protogen regenerates the Go code in messages/ from the .proto
// sources in proto/, without a system protoc: the sources are compiled in
// process with bufbuild/protocompile and the descriptors are handed to
// protoc-gen-go, pinned as a `go tool` in go.mod. The same function backs the
// `go generate ./messages` command and the test that fails when the committed
// code is stale.
package protogen

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

// ModulePath is the Go module the generated files belong to; protoc-gen-go
// strips it from go_package to place files relative to the module root.
const ModulePath = "github.com/memoria-ai/memoria"

// Generate compiles every .proto under protoRoot (the import root, e.g.
// "<repo>/proto") and returns the generated files keyed by their path relative
// to the module root (e.g. "messages/memory.pb.go"). moduleRoot is where `go
// tool protoc-gen-go` runs.
func Generate(ctx context.Context, moduleRoot, protoRoot string) (map[string][]byte, error) {
	var names []string
	err := filepath.WalkDir(protoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".proto") {
			rel, err := filepath.Rel(protoRoot, path)
			if err != nil {
				return err
			}
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("protogen: list sources: %w", err)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("protogen: no .proto files under %s", protoRoot)
	}

	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{protoRoot}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := c.Compile(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("protogen: compile: %w", err)
	}

	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: names,
		Parameter:      proto.String("module=" + ModulePath),
		ProtoFile:      orderedProtos(files),
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "tool", "protoc-gen-go")
	cmd.Dir = moduleRoot
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("protogen: protoc-gen-go: %w: %s", err, stderr.String())
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("protogen: decode plugin response: %w", err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("protogen: protoc-gen-go: %s", resp.GetError())
	}
	out := make(map[string][]byte, len(resp.File))
	for _, f := range resp.File {
		out[f.GetName()] = []byte(f.GetContent())
	}
	return out, nil
}

// orderedProtos returns the compiled files and all their imports as
// descriptor protos, dependencies before dependents, as protoc does.
func orderedProtos(files linker.Files) []*descriptorpb.FileDescriptorProto {
	var out []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var visit func(fd protoreflect.FileDescriptor)
	visit = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			visit(imports.Get(i).FileDescriptor)
		}
		out = append(out, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range files {
		visit(f)
	}
	return out
}

// Write generates and writes the files under moduleRoot, removing generated
// files (*.pb.go) in the output folders that no longer have a source.
func Write(ctx context.Context, moduleRoot, protoRoot string) error {
	files, err := Generate(ctx, moduleRoot, protoRoot)
	if err != nil {
		return err
	}
	dirs := map[string]bool{}
	for name, content := range files {
		path := filepath.Join(moduleRoot, filepath.FromSlash(name))
		dirs[filepath.Dir(path)] = true
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	for dir := range dirs {
		old, _ := filepath.Glob(filepath.Join(dir, "*.pb.go"))
		for _, p := range old {
			rel, _ := filepath.Rel(moduleRoot, p)
			if _, ok := files[filepath.ToSlash(rel)]; !ok {
				if err := os.Remove(p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
