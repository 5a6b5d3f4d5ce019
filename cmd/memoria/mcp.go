package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
)

// mcpCmd serves MCP over stdio: an MCP host (Claude Desktop, an IDE)
// starts it as a child process. It opens the data directory, or with
// --server relays to a running server's /mcp. stdout carries the protocol
// only; logs go to stderr.
func mcpCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP over stdio (for MCP hosts such as Claude Desktop); logs go to stderr",
		Long: "Serve MCP over stdio on the data directory, or with --server relay it to a running server's /mcp\n" +
			"(the data directory is used by one process at a time: while `memoria serve` runs, use --server).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig("warn")
			if err != nil {
				return err
			}
			log, sync := app.NewLogger(cfg.Log, os.Stderr)
			defer sync()
			if g.server != "" {
				return relayMCP(cmd.Context(), g.server, os.Getenv(config.EnvToken), log)
			}
			a, err := app.Open(cmd.Context(), cfg, log, app.Options{})
			if err != nil {
				return err
			}
			defer a.Close()
			log.Info("memoria mcp serving on stdio", "data", cfg.DataDir)
			return a.API.ServeMCPStdio(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&g.server, "server", "", "URL of a running server to relay to (default: open the data directory in this process); its token from $"+config.EnvToken)
	return cmd
}

// relayMCP serves MCP on stdio as the server at base serves it at /mcp:
// it connects as a client first (so a wrong address or token fails at
// once, in one line), then offers the host that server's tools, prompts
// and resource templates and forwards every call, result and error as
// they are.
func relayMCP(ctx context.Context, base, token string, log *slog.Logger) error {
	hc := http.DefaultClient
	if token != "" {
		hc = &http.Client{Transport: bearer{token}}
	}
	remote, err := mcp.NewClient(&mcp.Implementation{Name: "memoria-mcp-relay", Version: api.Version}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		return fmt.Errorf("--server %s: %w", base, err)
	}
	defer remote.Close()
	init := remote.InitializeResult()
	srv := mcp.NewServer(init.ServerInfo, &mcp.ServerOptions{Instructions: init.Instructions, Logger: log.With("component", "mcp")})
	for t, err := range remote.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("--server %s: listing tools: %w", base, err)
		}
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := remote.CallTool(ctx, &mcp.CallToolParams{Meta: req.Params.Meta, Name: req.Params.Name, Arguments: req.Params.Arguments})
			return res, relayed(err)
		})
	}
	for p, err := range remote.Prompts(ctx, nil) {
		if err != nil {
			return fmt.Errorf("--server %s: listing prompts: %w", base, err)
		}
		srv.AddPrompt(p, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			res, err := remote.GetPrompt(ctx, req.Params)
			return res, relayed(err)
		})
	}
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		res, err := remote.ReadResource(ctx, req.Params)
		return res, relayed(err)
	}
	for rt, err := range remote.ResourceTemplates(ctx, nil) {
		if err != nil {
			return fmt.Errorf("--server %s: listing resource templates: %w", base, err)
		}
		srv.AddResourceTemplate(rt, read)
	}
	log.Info("memoria mcp relaying stdio", "server", base)
	return srv.Run(ctx, &mcp.StdioTransport{})
}

// relayed is a remote error as the host should see it: the server's
// JSON-RPC error (its code: invalid params, resource not found) as it is.
func relayed(err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return rpc
	}
	return err
}

// bearer sends a token with every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
