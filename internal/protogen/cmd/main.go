// Command protogen regenerates messages/ from proto/. Run it from the module
// root with `go generate ./messages`.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memoria-ai/memoria/internal/protogen"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	if err := protogen.Write(context.Background(), root, filepath.Join(root, "proto")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
