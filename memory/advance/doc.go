// Package advance is one step of a sona — an advance (DESIGN.md §4.1) —
// as a pure machine: it plans what to do as effects, its owner (the sona
// actor, package actors) carries them out and feeds their results back,
// as the tier actor does with tiers.Step.
//
// The step, in effects (the result that answers each in parentheses):
//
//	Replay (Replayed)          a step with a request id: recorded before?
//	Embed (Embedded)           the input
//	Append (Appended)          the input, linked to the sona's last memory (sequential)
//	Load (Loaded)              the input an earlier attempt stored, when the append was replayed
//	Recall (Recalled)          for the input, the input excluded
//	Submit                     the recall's trace writes
//	RecallTiers (TiersRecalled) the STM pages, MTM segments and persona
//	Complete (Completed)       the model's response
//	Embed (Embedded)           the response
//	Append (Appended)          the response, edges to the input and to what was recalled (causal);
//	                           it closes the dialogue page, and records the answer under the request id
//	Reinforce, Wake, Visit     what was used; the STM; the MTM segments retrieval visited
//	Reply                      the answer, or the error that ended the step
//
// Start plans the first effects; Next takes the result of the last effect
// planned, with the sona's State when it arrives (its last memory, its
// name, the time), and plans the next; Fail ends a step whose owner gave
// up waiting. In a plan, only the last effect has a result; the others
// are done and forgotten. Every failure ends the step with a Reply; an
// input already stored stays (it happened), and no response is written.
//
// The machine computes and reads nothing: encoding and the store's checks
// come through Prepare (chain.Writer.Prepare), everything else through
// effects. testdata/advance is its golden record (input → planned
// effects): a change of behaviour changes it.
package advance
