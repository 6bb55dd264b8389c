package engine

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/gofi-dev/fi/transport"
)

// TestPutRMAOp_ResetsEveryField: an rmaOp given back is zero except for
// the capacity its slices keep, whatever fields it has (every field is
// set first, by reflection, so a field added later and not reset fails).
func TestPutRMAOp_ResetsEveryField(t *testing.T) {
	r := &rmaOp{}
	v := reflect.ValueOf(r).Elem()
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem() // unexported fields too
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		case reflect.Array:
			for i := range v.Len() {
				fill(v.Index(i))
			}
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 4))
			fill(v.Index(0))
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(7)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(7)
		default:
			t.Fatalf("fill: unhandled kind %v", v.Kind())
		}
	}
	fill(v)
	locals, remotes := r.locals, r.remotes
	ep := &Endpoint{}
	ep.putRMAOp(r)
	if locals[0] != nil {
		t.Error("the locals' backing array still references a buffer")
	}
	want := rmaOp{locals: r.locals, cmps: r.cmps, ress: r.ress, remotes: r.remotes}
	if !reflect.DeepEqual(*r, want) {
		t.Errorf("after putRMAOp: %+v", *r)
	}
	if len(r.locals) != 0 || cap(r.locals) != 4 || cap(r.remotes) != cap(remotes) {
		t.Error("the slices lost their capacity or kept their length")
	}
	if r.req.Remote != nil || r.remote[0] != (transport.RMAIOV{}) {
		t.Error("the request's ranges survived")
	}
}
