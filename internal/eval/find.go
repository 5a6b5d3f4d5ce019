package eval

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoData is returned by FindData when no LoCoMo folder is found.
var ErrNoData = errors.New("eval: LoCoMo conversations not found")

// DataEnv names a folder of LoCoMo conversations, for the commands and
// tests that look for one.
const DataEnv = "MEMORIA_LOCOMO"

// FindData is where the LoCoMo conversations are when no folder is given:
// $MEMORIA_LOCOMO, else shared/data/locomo beside the checkout that holds
// the working directory (the nearest parent directory with Memoria's
// go.mod: ../shared/data/locomo from the repository's root, wherever in it
// the command runs). The data is not part of the repository.
func FindData() (string, error) {
	if dir := os.Getenv(DataEnv); dir != "" {
		if err := hasConversations(dir); err != nil {
			return "", fmt.Errorf("%w: $%s: %v", ErrNoData, DataEnv, err)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := repoRoot(wd)
	if root == "" {
		return "", fmt.Errorf("%w: %s is not inside a Memoria checkout; give the folder with --data or $%s", ErrNoData, wd, DataEnv)
	}
	dir := filepath.Join(filepath.Dir(root), "shared", "data", "locomo")
	if err := hasConversations(dir); err != nil {
		return "", fmt.Errorf("%w: %v; give the folder with --data or $%s (the conversations of LoCoMo's public release, github.com/snap-research/locomo, one a *.json file)",
			ErrNoData, err, DataEnv)
	}
	return dir, nil
}

// repoRoot is the nearest directory from dir up whose go.mod declares
// Memoria's module, or "".
func repoRoot(dir string) string {
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module github.com/memoria-ai/memoria\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func hasConversations(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no conversation files (*.json) in %s", dir)
	}
	return nil
}
