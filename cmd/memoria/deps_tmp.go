package main
import (
 _ "github.com/asynkron/protoactor-go/actor"
 _ "github.com/dgraph-io/badger/v4"
 _ "github.com/ipld/go-ipld-prime/node/bindnode"
 _ "github.com/ipld/go-ipld-prime/codec/dagcbor"
 _ "github.com/coder/hnsw"
 _ "go.uber.org/zap"
 _ "go.uber.org/zap/exp/zapslog"
 _ "github.com/spf13/cobra"
 _ "gopkg.in/yaml.v3"
 _ "github.com/viterin/vek/vek32"
 _ "google.golang.org/protobuf/proto"
 _ "github.com/google/uuid"
)
func main(){}
