package api

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/memory/model"
)

// dataFromStruct is model.DataFromJSON of data's JSON, read straight from
// the request's decoded object, for the data an insert nearly always
// carries: text, other and self, every field a string (a self's parts a
// list of objects of strings). ok is false for anything else — a file (its
// content a link), a field of another type or name, a missing one, a stop
// reason out of its enum —, which takes the general path (DAG-JSON checked
// against the schema), where it is an error or the rarer data it is. The
// general path costs an insert three passes over its data (the object
// written as JSON, read as DAG-JSON, built through the schema's bindings);
// this one, none. FuzzDataFromStruct holds the two to the same blocks.
func dataFromStruct(s *structpb.Struct) (d model.Data, ok bool) {
	f := s.GetFields()
	kind, ok := stringOf(f["kind"])
	if !ok {
		return model.Data{}, false
	}
	switch kind {
	case model.KindText:
		content, ok := stringOf(f["content"])
		if !ok || len(f) != 2 {
			return model.Data{}, false
		}
		return model.Data{Text: &model.TextData{Content: content}}, true
	case model.KindOther:
		content, ok := stringOf(f["content"])
		if !ok {
			return model.Data{}, false
		}
		o := &model.OtherData{Content: content}
		if o.Name, ok = optString(f, "name"); !ok || len(f) != 2+ifSet(o.Name) {
			return model.Data{}, false
		}
		return model.Data{Other: o}, true
	case model.KindSelf:
		name, ok := stringOf(f["name"])
		if !ok {
			return model.Data{}, false
		}
		list := f["parts"].GetListValue()
		if list == nil {
			return model.Data{}, false
		}
		sd := &model.SelfData{Name: name, Parts: make([]model.Part, len(list.GetValues()))}
		for i, v := range list.GetValues() {
			pf := v.GetStructValue().GetFields()
			p := &sd.Parts[i]
			if p.Content, ok = stringOf(pf["content"]); !ok {
				return model.Data{}, false
			}
			if p.Model, ok = optString(pf, "model"); !ok || len(pf) != 1+ifSet(p.Model) {
				return model.Data{}, false
			}
		}
		if sd.StopReason, ok = optString(f, "stop_reason"); !ok || len(f) != 3+ifSet(sd.StopReason) {
			return model.Data{}, false
		}
		if r := sd.StopReason; r != nil && !model.ValidStopReason(*r) {
			return model.Data{}, false
		}
		return model.Data{Self: sd}, true
	}
	return model.Data{}, false
}

// stringOf is v's string, ok false when v is not one.
func stringOf(v *structpb.Value) (string, bool) {
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok {
		return "", false
	}
	return s.StringValue, true
}

// optString is f[name]'s string, nil when f has no name; ok false when it
// holds something else.
func optString(f map[string]*structpb.Value, name string) (*string, bool) {
	v, in := f[name]
	if !in {
		return nil, true
	}
	s, ok := stringOf(v)
	return &s, ok
}

// ifSet is 1 for a field that is set, 0 for one that is not.
func ifSet(s *string) int {
	if s != nil {
		return 1
	}
	return 0
}
