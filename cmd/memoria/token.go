package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
)

// tokenCmd makes and hashes bearer tokens for server.auth.tokens.
func tokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make bearer tokens and the hashed entries server.auth.tokens stores",
	}
	var name string
	var scopes, sonas []string
	newCmd := &cobra.Command{
		Use:   "new",
		Short: "Make a random token: prints the token (shown once) and its config entry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var raw [32]byte
			if _, err := rand.Read(raw[:]); err != nil {
				return err
			}
			token := "mem_" + base64.RawURLEncoding.EncodeToString(raw[:])
			entry := config.Token{Name: name, Hash: api.HashToken(token), Scopes: scopes, Sonas: sonas}
			check := config.Default()
			check.Server.Auth.Tokens = []config.Token{entry}
			if err := check.Validate(); err != nil {
				return err
			}
			if g.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"token": token,
					"entry": map[string]any{"name": entry.Name, "hash": entry.Hash, "scopes": entry.Scopes, "sonas": entry.Sonas}})
			}
			out, err := yaml.Marshal(map[string]any{"server": map[string]any{"auth": map[string]any{"tokens": []config.Token{entry}}}})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "token (shown once; send it as Authorization: Bearer <token>):\n%s\n\nadd to the config file:\n%s", token, out)
			return nil
		},
	}
	newCmd.Flags().StringVar(&name, "name", "", "name of the token in logs and errors (required)")
	newCmd.Flags().StringSliceVar(&scopes, "scope", []string{"read"}, "scopes: read, write, admin (each includes the ones before)")
	newCmd.Flags().StringSliceVar(&sonas, "sona", nil, "limit the token to these sona uuids")
	newCmd.Flags().BoolVar(&g.json, "json", false, "print JSON")
	_ = newCmd.MarkFlagRequired("name")

	hashCmd := &cobra.Command{
		Use:   "hash",
		Short: "Hash a token read from stdin (not from the command line, which others may see) for server.auth.tokens[].hash",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			token := strings.TrimSpace(line)
			if token == "" {
				if err != nil {
					return fmt.Errorf("token hash: give the token on stdin, e.g. echo \"$TOKEN\" | memoria token hash")
				}
				return fmt.Errorf("token hash: the token on stdin is empty")
			}
			fmt.Fprintln(cmd.OutOrStdout(), api.HashToken(token))
			return nil
		},
	}
	cmd.AddCommand(newCmd, hashCmd)
	return cmd
}
