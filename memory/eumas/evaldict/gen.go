//go:build ignore

// gen wrote dict1.bin, the dictionary the evaluation records of
// dictionary ID 1 are compressed against: the heuristic's evaluations of
// a few invented texts under the default archetypes, as stored. Run once
// (go run gen.go in this directory); never again for ID 1 — records
// written with it could no longer be read. A better dictionary is a new
// file under a new ID.
package main

import (
	"context"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/eumas"
)

func main() {
	h := eumas.NewHeuristic(config.DefaultArchetypes())
	inputs := []eumas.Input{
		{Text: "Went to the market in the rain and bought pears for the trip.", Kind: "note"},
		{Text: "I feel happy and grateful; honestly, I realized I love to learn new things and explore.", Kind: "event"},
		{Text: "What does it mean to live with purpose? I wonder, and I think I believe in growth.", Kind: "question"},
		{Text: "Plan: practice every day, discover a new place, try an unusual idea, and help a friend.", Kind: "plan"},
		{Text: "She was sad and worried, so we listened, comforted her and promised to support her.", Kind: "fact"},
	}
	var dict []byte
	for _, in := range inputs {
		e, err := h.Evaluate(context.Background(), in)
		if err != nil {
			panic(err)
		}
		e.EvaluatedAt = 1790000000
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
		if err != nil {
			panic(err)
		}
		dict = append(dict, b...)
	}
	if err := os.WriteFile("dict1.bin", dict, 0o644); err != nil {
		panic(err)
	}
}
