package recall

import (
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/messages"
)

// DecayOf is a memory's activity-relative decay factor (Decay) in a sona
// whose chain is activity long, the rate lambda (recall.lambda) scaled by
// its evaluated priority's decay_rate.
func DecayOf(lambda float64, meta *messages.MemoryMeta, activity int64) float64 {
	lambda *= eumas.DecayMultiplier(meta.Evaluation)
	return Decay(lambda, meta.Importance, meta.Backbone, activity, meta.LastAccessTick)
}

// metricCandidates are the n memories of the sona (and the backbone)
// whose metric profiles are nearest prof: the metric path matches the
// query against the sona's own experience, in either scope.
func (s *Recaller) metricCandidates(sona, backbone string, prof []float32, n int) []pathHit {
	if prof == nil {
		return nil
	}
	var out []pathHit
	for _, h := range s.profiles.Nearest(prof, s.sonas.Members(sona, backbone, true), n) {
		if key, ok := s.index.Key(h.ID); ok {
			out = append(out, pathHit{key: key, score: h.Sim})
		}
	}
	return out
}

// metricSim is the cosine between the query's metric profile and the
// memory's; 0 when the memory has none.
func (sc *scorer) metricSim(c cid.Cid) float64 {
	if id, ok := sc.self.index.ID(c.KeyString()); ok {
		if p := sc.self.profiles.ProfileOf(id); p != nil {
			return base.Dot(sc.profile, p)
		}
	}
	return 0
}
