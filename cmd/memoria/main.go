// Command memoria is Memoria's single binary: the server and its clients.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/messages"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "memoria:", err)
		os.Exit(1)
	}
}

// globals are the flags every command shares.
type globals struct {
	configFile string
	dataDir    string
	logLevel   string
	server     string
	json       bool
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "memoria",
		Short:         "Memoria: a memory server for LLM agents",
		Long:          "Memoria stores every input, output and reasoning step of an agent as an immutable, content-addressed\nmemory in a DAG, grouped into sonas that each advance one linear chain of thought.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) (err error) {
			g.server, err = serverURL(g.server)
			return err
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.configFile, "config", "", "YAML config file (default $"+config.EnvConfigFile+")")
	pf.StringVar(&g.dataDir, "data", "", "data directory (default ./memoria-data)")
	pf.StringVar(&g.logLevel, "log-level", "", "debug | info | warn | error")
	root.AddCommand(serveCmd(g), mcpCmd(g), tokenCmd(g), chatCmd(g), insertCmd(g), recallCmd(g), sonasCmd(g), demoCmd(g), configCmd(g), evalCmd(g), reindexCmd(g), repairCmd(g), tiersCmd(g),
		heartbeatCmd(g), compactCmd(g), exportCmd(g), importCmd(g), anchorsCmd(g), loadCmd(g), tortureCmd(g), benchCmd(g),
		gcCmd(g), statusCmd(g), backupCmd(g), restoreCmd(g), etcdCmd(g), clusterCmd(g), forgetCmd(g))
	return root
}

// clientFlags adds --server and --json to a command that talks to Memoria.
func clientFlags(cmd *cobra.Command, g *globals) {
	cmd.Flags().StringVar(&g.server, "server", "", "URL of a running server (default: open the data directory in this process); its token from $"+config.EnvToken)
	cmd.Flags().BoolVar(&g.json, "json", false, "print JSON")
}

// serverURL is --server as a base URL: host:port alone (127.0.0.1:7777,
// localhost:7777, [::1]:7777) means http://host:port.
func serverURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	given := s
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" && strings.HasSuffix(u.Host, ":") ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--server %q: want the server's address as http://host:port (or host:port; https:// behind TLS), e.g. http://127.0.0.1:7777", given)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// loadConfig applies defaults, the file, the environment, then flags.
func (g *globals) loadConfig(defaultLevel string) (config.Config, error) {
	file := g.configFile
	if file == "" {
		file = os.Getenv(config.EnvConfigFile)
	}
	cfg, err := config.Load(file, os.Environ())
	if err != nil {
		return cfg, err
	}
	if g.dataDir != "" {
		cfg.DataDir = g.dataDir
	}
	if g.logLevel != "" {
		cfg.Log.Level = g.logLevel
	} else if defaultLevel != "" && os.Getenv("MEMORIA_LOG_LEVEL") == "" && file == "" {
		cfg.Log.Level = defaultLevel
	}
	return cfg, cfg.Validate()
}

// connect returns a client of the server at --server, or of an embedded
// server on the data directory, and a function that releases it.
func (g *globals) connect(ctx context.Context) (*client.Client, func(), error) {
	if g.server != "" {
		return client.New(g.server, nil).WithToken(os.Getenv(config.EnvToken)), func() {}, nil
	}
	cfg, err := g.loadConfig("warn")
	if err != nil {
		return nil, nil, err
	}
	log, sync := app.NewLogger(cfg.Log, os.Stderr)
	a, err := app.Open(ctx, cfg, log, app.Options{})
	if err != nil {
		sync()
		return nil, nil, err
	}
	return client.Embedded(a.API), func() {
		if err := a.Close(); err != nil {
			log.Error("close", "err", err)
		}
		sync()
	}, nil
}

// connectSona connects (see connect) and resolves the sona named by ref;
// with create, a name no sona has is created.
func (g *globals) connectSona(ctx context.Context, ref string, create bool) (*client.Client, *messages.Sona, func(), error) {
	if ref == "" {
		return nil, nil, nil, fmt.Errorf("--sona is required")
	}
	c, release, err := g.connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	rec, err := c.ResolveSona(ctx, ref, create)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return c, rec, release, nil
}
