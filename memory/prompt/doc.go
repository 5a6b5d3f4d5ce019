// Package prompt assembles what a sona's step shows its model (Build): a
// system message with the persona and the mid-term pages the tiers
// retrieved, the recalled memories replayed as the turns they were, the
// short-term dialogue, and the input — cut, least valuable first, to fit
// the model's context. It also builds the two memories a step stores:
// the input (TextMemory) and the sona's response (ResponseMemory).
//
// It is pure: the same input gives the same request (golden tests in
// testdata/prompt: `go test ./memory/prompt -run TestPromptGolden
// -rewrite`). It owns no key space.
package prompt
