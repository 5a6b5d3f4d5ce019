package api

// MCP prompts: templates a host offers its user (Claude Desktop and most
// IDEs show them as slash commands). recall_and_answer recalls on the
// server and hands the model the memories with the question;
// remember asks the model to store what a text holds through the insert
// tool. Both act as the session's principal, like the tools.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoria-ai/memoria/messages"
)

func (m *mcpTools) addPrompts(srv *mcp.Server) {
	sona := &mcp.PromptArgument{Name: "sona", Title: "Sona", Required: true,
		Description: "the sona whose memories to use: its uuid or unambiguous name"}
	srv.AddPrompt(&mcp.Prompt{Name: "recall_and_answer", Title: "Recall, then answer",
		Description: "Recall a sona's memories for a question and ask the model to answer from them, citing what it uses.",
		Arguments: []*mcp.PromptArgument{sona,
			{Name: "question", Title: "Question", Required: true, Description: "the question to answer from memory"},
			{Name: "scope", Title: "Scope", Description: "sona (this sona and the backbone) or self (every sona, weighted by similarity); absent: the configured default"},
		}}, m.recallAndAnswer)
	srv.AddPrompt(&mcp.Prompt{Name: "remember", Title: "Remember this",
		Description: "Ask the model to store what is worth keeping from a text in a sona, one insert per fact.",
		Arguments: []*mcp.PromptArgument{sona,
			{Name: "text", Title: "Text", Required: true, Description: "what to remember from: notes, a conversation, a document"},
		}}, m.remember)
}

// promptArgs checks a prompt's arguments: the required ones present and
// not blank, no unknown ones.
func promptArgs(req *mcp.GetPromptRequest, required []string, optional ...string) (map[string]string, error) {
	args := req.Params.Arguments
	for name := range args {
		if !slices.Contains(required, name) && !slices.Contains(optional, name) {
			return nil, badRequest("invalid", "prompt %s has no argument %q", req.Params.Name, name)
		}
	}
	for _, name := range required {
		if strings.TrimSpace(args[name]) == "" {
			return nil, badRequest("invalid", "argument %s is required", name)
		}
	}
	return args, nil
}

// promptError is a prompt's error as the protocol carries it: invalid
// params for bad or unknown arguments (the sona included), the classified
// message otherwise.
func (m *mcpTools) promptError(ctx context.Context, err error) error {
	status, code, msg := m.s.classify(ctx, err)
	if status == http.StatusBadRequest || status == http.StatusNotFound || status == http.StatusConflict {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %s", code, msg)}
	}
	return fmt.Errorf("%s: %s", code, msg)
}

func userPrompt(description, text string) *mcp.GetPromptResult {
	return &mcp.GetPromptResult{Description: description,
		Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}
}

func (m *mcpTools) recallAndAnswer(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	ctx, cancel := m.call(ctx)
	defer cancel()
	args, err := promptArgs(req, []string{"sona", "question"}, "scope")
	if err != nil {
		return nil, m.promptError(ctx, err)
	}
	rec, err := m.s.resolveSona(ctx, args["sona"])
	if err != nil {
		return nil, m.promptError(ctx, err)
	}
	recalled, _, err := m.s.recallOp(ctx, rec, &messages.RecallRequest{Query: args["question"], Scope: args["scope"]})
	if err != nil {
		return nil, m.promptError(ctx, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Answer the question below from what the sona %q remembers. Memoria recalled these memories for it, "+
		"in the order they happened. Cite the CID of each memory you use. If they do not hold the answer, "+
		"say that you do not remember it rather than guess.\n\n", rec.Name)
	if len(recalled) == 0 {
		b.WriteString("Memories: none were recalled.\n")
	} else {
		b.WriteString("Memories:\n")
	}
	for i, rc := range recalled {
		mo := memoryOutput(rc.CID, rc.Memory)
		fmt.Fprintf(&b, "%d. [%s, score %.3f, %s", i+1, mo.CID, rc.Score, rc.Via)
		if mo.Timestamp != 0 {
			fmt.Fprintf(&b, ", %s", time.Unix(mo.Timestamp, 0).UTC().Format("2006-01-02 15:04 UTC"))
		}
		b.WriteString("] ")
		if mo.Kind == "other" && mo.Name != "" && !strings.HasPrefix(mo.Text, mo.Name) {
			b.WriteString(mo.Name + ": ")
		}
		b.WriteString(strings.ReplaceAll(mo.Text, "\n", " ") + "\n")
	}
	fmt.Fprintf(&b, "\nQuestion: %s\n", args["question"])
	return userPrompt(fmt.Sprintf("%d memories of %s recalled for the question", len(recalled), rec.Name), b.String()), nil
}

func (m *mcpTools) remember(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	ctx, cancel := m.call(ctx)
	defer cancel()
	args, err := promptArgs(req, []string{"sona", "text"})
	if err != nil {
		return nil, m.promptError(ctx, err)
	}
	rec, err := m.s.resolveSona(ctx, args["sona"])
	if err != nil {
		return nil, m.promptError(ctx, err)
	}
	if err := requireScope(ctx, ScopeWrite); err != nil { // what the prompt asks for
		return nil, m.promptError(ctx, err)
	}
	text := fmt.Sprintf("Store what is worth remembering from the text below in the sona %q (uuid %s) with Memoria's insert tool: "+
		"one call per durable fact, preference, goal, decision or event, each a sentence that stands on its own "+
		"(name people and things instead of \"he\" or \"it\"; give the date when it matters), with kind one of %s. "+
		"Leave out small talk and what is already known. Then list what you stored.\n\nText:\n%s\n",
		rec.Name, rec.Uuid, strings.Join(m.s.mcp.kinds, ", "), args["text"])
	return userPrompt("store the text's facts in "+rec.Name, text), nil
}
