package feishu

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// sdkBytes builds, field by field with protowire, the bytes the SDK's
// gogo-generated Frame.Marshal writes (ws/pbbp2.pb.go, MarshalToSizedBuffer:
// 0x08 SeqID, 0x10 LogID, 0x18 service, 0x20 method, 0x2a each header
// {0x0a key, 0x12 value}, 0x32 payload_encoding, 0x3a payload_type, 0x42
// payload when not nil, 0x4a LogIDNew), independently of frame.marshal.
func sdkBytes() []byte {
	b := []byte{0x08}
	b = protowire.AppendVarint(b, 300)
	b = append(b, 0x10)
	b = protowire.AppendVarint(b, 1<<40)
	b = append(b, 0x18)
	b = protowire.AppendVarint(b, 33)
	b = append(b, 0x20, 0x01)
	for _, h := range [][2]string{{"type", "event"}, {"message_id", "m1"}, {"sum", "2"}, {"seq", "1"}} {
		hb := append([]byte{0x0a}, protowire.AppendString(nil, h[0])...)
		hb = append(hb, 0x12)
		hb = protowire.AppendString(hb, h[1])
		b = append(b, 0x2a)
		b = protowire.AppendBytes(b, hb)
	}
	b = append(b, 0x32, 0x00, 0x3a, 0x00, 0x42)
	b = protowire.AppendString(b, `{"schema":"2.0"}`)
	b = append(b, 0x4a)
	return protowire.AppendString(b, "log-new-1")
}

func TestAFrameDecodesAndEncodesAsTheSDKsBytes(t *testing.T) {
	raw := sdkBytes()
	f, err := unmarshalFrame(raw)
	if err != nil {
		t.Fatal(err)
	}
	if f.SeqID != 300 || f.LogID != 1<<40 || f.Service != 33 || f.Method != methodData || f.LogIDNew != "log-new-1" ||
		string(f.Payload) != `{"schema":"2.0"}` || f.header(hType) != typeEvent || f.header(hMessageID) != "m1" ||
		f.header(hSum) != "2" || f.header(hSeq) != "1" || len(f.Headers) != 4 {
		t.Fatalf("decoded %+v", f)
	}
	if got := f.marshal(); !bytes.Equal(got, raw) {
		t.Errorf("re-encoded\n%x\nwant\n%x", got, raw)
	}
	// A ping as the SDK's NewPingFrame makes it: no payload field at all.
	ping := frame{Service: 33, Method: methodControl, Headers: []frameHeader{{hType, typePing}}}
	want := []byte{0x08, 0x00, 0x10, 0x00, 0x18, 33, 0x20, 0x00, 0x2a, 0x0c, 0x0a, 0x04, 't', 'y', 'p', 'e', 0x12, 0x04, 'p', 'i', 'n', 'g', 0x32, 0x00, 0x3a, 0x00, 0x4a, 0x00}
	if got := ping.marshal(); !bytes.Equal(got, want) {
		t.Errorf("ping\n%x\nwant\n%x", got, want)
	}
	if _, err := unmarshalFrame([]byte{0x2a, 0x05, 0x0a}); err == nil {
		t.Error("a truncated frame decoded")
	}
}
