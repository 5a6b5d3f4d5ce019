// Package messages holds the Go code generated from proto/memoria/v1: every
// actor message and API payload. Do not edit the *.pb.go files; change the
// .proto sources and run `go generate ./messages` from the module root.
package messages

//go:generate go run ../internal/protogen/cmd ..
