package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/memoria-ai/memoria/messages"
)

func chatCmd(g *globals) *cobra.Command {
	var sona, name, agent string
	var k int
	cmd := &cobra.Command{
		Use:   "chat --sona NAME [MESSAGE]",
		Short: "Chat with a sona: one message from the arguments, or one per line from stdin",
		Long: "Chat with a sona. Each message advances the sona: the input is stored, memories are recalled,\n" +
			"the model answers, and the answer is stored. With a MESSAGE argument it sends that one message;\n" +
			"otherwise it reads messages line by line (interactive on a terminal; /quit ends).\n" +
			"The sona is created when no sona has that name.",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, rec, release, err := g.connectSona(ctx, sona, true)
			if err != nil {
				return err
			}
			defer release()
			send := func(text string) error {
				req := &messages.ChatRequest{Content: text, Name: name, AgentId: agent, K: int32(k)}
				if g.json {
					resp, err := c.Chat(ctx, rec.Uuid, req)
					if err != nil {
						return err
					}
					return printJSON(cmd.OutOrStdout(), resp)
				}
				// The reply is printed as the model generates it.
				out := cmd.OutOrStdout()
				started := false
				_, err := c.ChatStream(ctx, rec.Uuid, req, func(t string) {
					if !started {
						fmt.Fprintf(out, "%s: ", rec.Name)
						started = true
					}
					fmt.Fprint(out, t)
				})
				if err == nil && !started {
					fmt.Fprintf(out, "%s: ", rec.Name)
					started = true
				}
				if started {
					fmt.Fprintln(out)
				}
				return err
			}
			if len(args) > 0 {
				return send(strings.Join(args, " "))
			}
			interactive := term.IsTerminal(int(os.Stdin.Fd()))
			if interactive {
				fmt.Fprintf(cmd.ErrOrStderr(), "chatting with %s (%s); /quit to end\n", rec.Name, rec.Uuid)
			}
			in := bufio.NewScanner(cmd.InOrStdin())
			in.Buffer(make([]byte, 64<<10), 4<<20)
			for {
				if interactive {
					fmt.Fprint(cmd.ErrOrStderr(), "> ")
				}
				if !in.Scan() {
					return in.Err()
				}
				line := strings.TrimSpace(in.Text())
				switch line {
				case "":
					continue
				case "/quit", "/exit":
					return nil
				}
				if err := send(line); err != nil {
					return err
				}
			}
		},
	}
	cmd.Flags().StringVar(&sona, "sona", "", "sona uuid or name (created if no sona has the name)")
	cmd.Flags().StringVar(&name, "name", "", "speaker name of your messages (stored as `other` memories)")
	cmd.Flags().StringVar(&agent, "agent", "", "agent id recorded as provenance")
	cmd.Flags().IntVarP(&k, "k", "k", 0, "ranked hits to recall per message (default recall.top_k; what they reach along edges comes on top)")
	clientFlags(cmd, g)
	return cmd
}
