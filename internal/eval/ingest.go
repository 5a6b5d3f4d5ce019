package eval

import (
	"context"
	"fmt"
	"sync"

	"github.com/ipfs/go-cid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/messages"
)

// Ingested is what scoring needs to know about conversations stored by
// Ingest.
type Ingested struct {
	Convs []Conversation
	Sonas []string          // sona uuid per conversation
	Turns [][]cid.Cid       // memory per turn, in order, per conversation
	Dia   map[string]string // memory CID → dia id
	// The scored questions, conversation by conversation (Questions).
	Qs []Question
}

// AskedAt is when question i is asked (unix seconds): the time of its
// conversation's last session, which the questions look back from.
func (ing *Ingested) AskedAt(i int) int64 {
	ss := ing.Convs[ing.Qs[i].ConvAt].Sessions
	return ss[len(ss)-1].Time.Unix()
}

// Turns counts the turns of convs.
func Turns(convs []Conversation) int {
	n := 0
	for _, cv := range convs {
		for _, s := range cv.Sessions {
			n += len(s.Turns)
		}
	}
	return n
}

// Ingest stores each conversation in its own new sona through the insert
// API, one goroutine per conversation: each turn an `other` memory named
// by its speaker, timestamped from its session plus its position, image
// captions appended, its dia_id and conversation as labels, an edge to the
// turn before it in the session, never deduplicated. added is called
// after each turn (it may be nil).
func Ingest(ctx context.Context, c *client.Client, convs []Conversation, added func()) (*Ingested, error) {
	ing := &Ingested{Convs: convs, Sonas: make([]string, len(convs)), Turns: make([][]cid.Cid, len(convs)), Dia: map[string]string{},
		Qs: Questions(convs)}
	var mu sync.Mutex
	eg, ectx := errgroup.WithContext(ctx)
	for i, cv := range convs {
		eg.Go(func() error {
			sona, err := c.CreateSona(ectx, "locomo-"+cv.ID)
			if err != nil {
				return err
			}
			ing.Sonas[i] = sona.Uuid
			for _, s := range cv.Sessions {
				var prev string
				for j, t := range s.Turns {
					data, err := structpb.NewStruct(map[string]any{"kind": "other", "name": t.Speaker, "content": t.Content()})
					if err != nil {
						return err
					}
					req := &messages.InsertRequest{
						Sona: sona.Uuid, Data: data, Kind: "observation",
						Timestamp: proto.Int64(s.Time.Unix() + int64(j)),
						Labels:    map[string]string{"dia_id": t.DiaID, "conversation": cv.ID},
						Dedup:     proto.Bool(false),
					}
					if prev != "" {
						req.Edges = []*messages.Edge{{Target: &messages.Link{Cid: prev}, Weight: 1}}
					}
					res, err := c.Insert(ectx, req)
					if err != nil {
						return fmt.Errorf("%s %s: %w", cv.ID, t.DiaID, err)
					}
					prev = res.Cid
					c, err := cid.Decode(res.Cid)
					if err != nil {
						return err
					}
					ing.Turns[i] = append(ing.Turns[i], c)
					mu.Lock()
					ing.Dia[res.Cid] = t.DiaID
					mu.Unlock()
					if added != nil {
						added()
					}
				}
			}
			return nil
		})
	}
	return ing, eg.Wait()
}
