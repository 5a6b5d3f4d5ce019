package main

import (
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/messages"
)

func insertCmd(g *globals) *cobra.Command {
	var sona, kind, name, agent, file, raw, ts string
	var edges, labels []string
	cmd := &cobra.Command{
		Use:   "insert --sona NAME [TEXT]",
		Short: "Store a memory in a sona without calling the model",
		Long: "Store a memory in a sona. The memory is TEXT (or stdin) as a `text` memory, an `other`\n" +
			"memory with --name, a file with --file, or any data union with --raw '{\"kind\":...}'.\n" +
			"Prints the memory's CID.",
		Example: "  memoria insert --sona alice --kind fact \"Alice's sister is called Maya\"\n" +
			"  memoria insert --sona alice --file notes.pdf\n" +
			"  memoria insert --sona alice --edge bafy...=0.8 \"follows from the earlier note\"",
		RunE: func(cmd *cobra.Command, args []string) error {
			if sona == "" {
				return fmt.Errorf("--sona is required")
			}
			ctx := cmd.Context()
			req := &messages.InsertRequest{Sona: sona, Kind: kind, AgentId: agent}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return fmt.Errorf("--label wants key=value, got %q", l)
				}
				if req.Labels == nil {
					req.Labels = map[string]string{}
				}
				req.Labels[k] = v
			}
			for _, e := range edges {
				target, weight, hasWeight := strings.Cut(e, "=")
				w := 1.0
				if hasWeight {
					var err error
					if w, err = strconv.ParseFloat(weight, 64); err != nil {
						return fmt.Errorf("--edge wants CID[=WEIGHT], got %q", e)
					}
				}
				req.Edges = append(req.Edges, &messages.Edge{Target: &messages.Link{Cid: target}, Weight: w})
			}
			switch ts {
			case "":
			case "now":
				req.Timestamp = proto.Int64(time.Now().Unix())
			default:
				n, err := strconv.ParseInt(ts, 10, 64)
				if err != nil {
					return fmt.Errorf("--timestamp wants unix seconds or \"now\", got %q", ts)
				}
				req.Timestamp = &n
			}

			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()

			data := map[string]any{}
			switch {
			case raw != "":
				req.Data = &structpb.Struct{}
				if err := protojson.Unmarshal([]byte(raw), req.Data); err != nil {
					return fmt.Errorf("--raw is not a JSON object: %v", err)
				}
			case file != "":
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				up, err := c.PutFile(ctx, f)
				f.Close()
				if err != nil {
					return err
				}
				data["kind"] = "file"
				data["name"] = filepath.Base(file)
				if mt := mime.TypeByExtension(filepath.Ext(file)); mt != "" {
					data["mimeType"] = mt
				}
				data["content"] = map[string]any{"/": up.Cid}
			default:
				text := strings.Join(args, " ")
				if len(args) == 0 {
					b, err := io.ReadAll(cmd.InOrStdin())
					if err != nil {
						return err
					}
					text = strings.TrimSpace(string(b))
				}
				if text == "" {
					return fmt.Errorf("nothing to insert: give TEXT, stdin, --file or --raw")
				}
				data["content"] = text
				data["kind"] = "text"
				if name != "" {
					data["kind"] = "other"
					data["name"] = name
				}
			}
			if req.Data == nil {
				if req.Data, err = structpb.NewStruct(data); err != nil {
					return err
				}
			}
			resp, err := c.Insert(ctx, req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Cid)
			if resp.Existed {
				fmt.Fprintln(cmd.ErrOrStderr(), "(already in the sona: nothing appended)")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&sona, "sona", "", "sona uuid or name")
	f.StringVar(&kind, "kind", "", "kind: outcome | fact | error | goal | observation | note (default note)")
	f.StringVar(&name, "name", "", "speaker name: store an `other` memory")
	f.StringVar(&agent, "agent", "", "agent id recorded as provenance")
	f.StringVar(&file, "file", "", "store this file and a `file` memory pointing to it")
	f.StringVar(&raw, "raw", "", `the data union as JSON, e.g. '{"kind":"self","name":"a","parts":[{"content":"hi"}]}'`)
	f.StringVar(&ts, "timestamp", "", `unix seconds, or "now" (default: none, so equal memories share one CID)`)
	f.StringArrayVar(&edges, "edge", nil, "CID[=WEIGHT] of a supporting memory (repeatable)")
	f.StringArrayVar(&labels, "label", nil, "key=value label (repeatable)")
	clientFlags(cmd, g)
	return cmd
}
