package memory

import "github.com/memoria-ai/memoria/memory/model"

// The memory model lives in memory/model; these aliases keep the callers
// of package memory (api, actors, cmd) compiling while the subsystems move
// out (issue 14). New code imports memory/model.
type (
	Memory    = model.Memory
	Data      = model.Data
	SelfData  = model.SelfData
	Part      = model.Part
	OtherData = model.OtherData
	TextData  = model.TextData
	FileData  = model.FileData
	Edge      = model.Edge
	Act       = model.Act
	Prepared  = model.Prepared
	Neighbor  = model.Neighbor
	Append    = model.Append
	Request   = model.Request
)

// Codecs and data kinds (see memory/model).
const (
	CodecDagCBOR = model.CodecDagCBOR
	CodecRaw     = model.CodecRaw
	KindSelf     = model.KindSelf
	KindOther    = model.KindOther
	KindText     = model.KindText
	KindFile     = model.KindFile
)

// Functions of the model (see memory/model).
var (
	Schema         = model.Schema
	SortEdges      = model.SortEdges
	SumCID         = model.SumCID
	DecodeMemory   = model.DecodeMemory
	MemoryFromNode = model.MemoryFromNode
	DataFromJSON   = model.DataFromJSON
	DataFromNode   = model.DataFromNode
	DecodeAct      = model.DecodeAct
	PlanAppend     = model.PlanAppend
)
