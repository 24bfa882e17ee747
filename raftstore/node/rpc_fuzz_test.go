package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func frame(body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(b, body...)
}

// FuzzReadFrame feeds arbitrary bytes to the RPC frame decoder as a
// stranger's connection would: it must never panic, never read or allocate
// past a header announcing more than the limit, and whatever it accepts
// must survive an encode/decode round trip unchanged.
func FuzzReadFrame(f *testing.F) {
	f.Add(frame(`{"op":"status"}`))
	f.Add(frame(`{"op":"join","id":"r3-1","address":"127.0.0.1:7000","token":"t"}`))
	f.Add(frame(`{"op":"apply","data":"AQJ7fQ=="}`))
	f.Add(frame(`{"op":`))
	f.Add(frame(`[]`))
	f.Add(frame(`{"data":"","op":null}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, '{'})
	f.Add([]byte{0, 0, 0})
	f.Add(append(frame(`{"op":"status"}`), frame(`{"op":"apply"}`)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		var req rpcRequest
		err := readFrame(r, &req, maxStrangerFrame)
		if len(b) >= 4 {
			size := binary.BigEndian.Uint32(b[:4])
			if size > maxStrangerFrame {
				if !errors.Is(err, errFrameTooLarge) {
					t.Fatalf("frame of %d bytes over the limit: got %v", size, err)
				}
				if r.Len() != len(b)-4 {
					t.Fatalf("read %d body bytes of a refused frame", len(b)-4-r.Len())
				}
			}
		}
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := writeFrame(&buf, &req); err != nil {
			t.Fatalf("re-encoding an accepted request: %v", err)
		}
		var again rpcRequest
		if err := readFrame(&buf, &again, maxRPCSize); err != nil {
			t.Fatalf("decoding a re-encoded request: %v", err)
		}
		// omitempty turns an empty byte slice into an absent one.
		if len(req.Data) == 0 {
			req.Data = nil
		}
		if diff := cmp.Diff(req, again); diff != "" {
			t.Fatalf("round trip changed the request (-before +after):\n%s", diff)
		}
	})
}
