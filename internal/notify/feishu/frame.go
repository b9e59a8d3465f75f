package feishu

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// frame is one message of the Feishu long connection: the protobuf message
// pbbp2.Frame of Feishu's SDKs (larksuite/oapi-sdk-go, ws/pbbp2.pb.go),
// written here with protowire rather than generated code. Its fields, by
// number: 1 SeqID (uint64), 2 LogID (uint64), 3 service (int32), 4 method
// (int32: 0 control, 1 data), 5 headers (repeated {1 key, 2 value}),
// 6 payload_encoding, 7 payload_type, 8 payload (bytes), 9 LogIDNew
// (string). The SDK's proto2 encoding writes 1 to 4, 6, 7 and 9 always and
// 8 only when set; marshal does the same, so that an answer is the bytes
// the SDK would send.
type frame struct {
	SeqID, LogID    uint64
	Service, Method int32
	Headers         []frameHeader
	PayloadEncoding string
	PayloadType     string
	Payload         []byte
	LogIDNew        string
}

// frameHeader is one header of a frame.
type frameHeader struct{ Key, Value string }

// Frame methods and the headers the long connection uses (the SDK's
// ws/const.go).
const (
	methodControl = 0
	methodData    = 1

	hType      = "type"       // ping, pong, event, card
	hMessageID = "message_id" // the message a part belongs to
	hSum       = "sum"        // how many parts the message has, 1 when whole
	hSeq       = "seq"        // the part's index, from 0
	hTraceID   = "trace_id"
	hBizRt     = "biz_rt" // how long the client took, in ms, on its answer

	typePing  = "ping"
	typePong  = "pong"
	typeEvent = "event"
	typeCard  = "card"
)

// header returns the value of key, "" when absent.
func (f *frame) header(key string) string {
	for _, h := range f.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

// marshal encodes f as the SDK does.
func (f *frame) marshal() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, f.SeqID)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, f.LogID)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(f.Service)))
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(f.Method)))
	for _, h := range f.Headers {
		var hb []byte
		hb = protowire.AppendTag(hb, 1, protowire.BytesType)
		hb = protowire.AppendString(hb, h.Key)
		hb = protowire.AppendTag(hb, 2, protowire.BytesType)
		hb = protowire.AppendString(hb, h.Value)
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, hb)
	}
	b = protowire.AppendTag(b, 6, protowire.BytesType)
	b = protowire.AppendString(b, f.PayloadEncoding)
	b = protowire.AppendTag(b, 7, protowire.BytesType)
	b = protowire.AppendString(b, f.PayloadType)
	if f.Payload != nil {
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, f.Payload)
	}
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendString(b, f.LogIDNew)
	return b
}

var errFrame = errors.New("not a frame of the Feishu long connection")

// unmarshalFrame decodes b, skipping fields it does not know.
func unmarshalFrame(b []byte) (frame, error) {
	var f frame
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return frame{}, fmt.Errorf("%w: %v", errFrame, protowire.ParseError(n))
		}
		b = b[n:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return frame{}, fmt.Errorf("%w: field %d: %v", errFrame, num, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			f.SeqID = v
		case num == 2 && typ == protowire.VarintType:
			f.LogID = v
		case num == 3 && typ == protowire.VarintType:
			f.Service = int32(v)
		case num == 4 && typ == protowire.VarintType:
			f.Method = int32(v)
		case num == 5 && typ == protowire.BytesType:
			h, err := unmarshalHeader(raw)
			if err != nil {
				return frame{}, err
			}
			f.Headers = append(f.Headers, h)
		case num == 6 && typ == protowire.BytesType:
			f.PayloadEncoding = string(raw)
		case num == 7 && typ == protowire.BytesType:
			f.PayloadType = string(raw)
		case num == 8 && typ == protowire.BytesType:
			f.Payload = append([]byte{}, raw...)
		case num == 9 && typ == protowire.BytesType:
			f.LogIDNew = string(raw)
		}
	}
	return f, nil
}

func unmarshalHeader(b []byte) (frameHeader, error) {
	var h frameHeader
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return frameHeader{}, fmt.Errorf("%w: header: %v", errFrame, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return frameHeader{}, fmt.Errorf("%w: header: %v", errFrame, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		raw, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return frameHeader{}, fmt.Errorf("%w: header: %v", errFrame, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1:
			h.Key = string(raw)
		case 2:
			h.Value = string(raw)
		}
	}
	return h, nil
}
