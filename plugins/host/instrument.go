package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Deadline enforcement without wazero's WithCloseOnContextDone. That option
// makes every loop iteration leave native code for a Go check and every call
// start a watcher goroutine: 5 µs per decision for a Go guest. Instead the
// module is rewritten before compiling. It gets two mutable i32 globals,
// $stop (exported as stopExport) and $fuel, and every loop header starts
// with
//
//	global.get $fuel  i32.eqz
//	if
//	  i32.const checkEvery  global.set $fuel
//	  i32.const 0  memory.grow  drop       ;; leaves native code: see below
//	  global.get $stop  if unreachable end
//	end
//	global.get $fuel  i32.const 1  i32.sub  global.set $fuel
//
// a few instructions per iteration, and every checkEvery iterations a look
// at $stop. The watchdog sets $stop of an instance whose call overran, so
// the guest traps soon after. The periodic memory.grow(0) is a trip into Go
// (wazero grows memory in Go): the Go scheduler cannot preempt native code,
// so without it a looping guest would block every stop-the-world phase of
// the garbage collector, the watchdog with it, forever. A guest without
// loops cannot run for long (recursion hits the stack limit). A wasm start
// section becomes an export (startExport) that the host calls after
// instantiation, under the watchdog like _initialize.

// checkEvery is how many loop iterations pass between two stop checks.
const checkEvery = 1024

// stopExport and startExport are the names the rewrite adds.
const (
	stopExport  = "tailplane.watchdog.stop"
	startExport = "tailplane.watchdog.start"
)

var errInstrument = errors.New("module cannot be instrumented")

// Section ids and their required order.
const (
	secCustom, secImport, secMemory, secGlobal, secExport, secStart, secCode = 0, 2, 5, 6, 7, 8, 10
)

var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id   byte
	body []byte
}

// instrument returns module with the stop global and loop checks, and
// whether it had a start section (now exported as startExport).
func instrument(module []byte) (out []byte, hadStart bool, err error) {
	if len(module) < 8 || !bytes.Equal(module[:4], wasmMagic) {
		return nil, false, fmt.Errorf("%w: no wasm header", errInstrument)
	}
	r := &reader{b: module, i: 8}
	var secs []section
	for r.i < len(r.b) {
		id := r.byte()
		n := r.u32()
		secs = append(secs, section{id, r.bytes(int(n))})
		if r.err != nil {
			return nil, false, r.err
		}
	}
	importedGlobals, globals, hasMemory := uint32(0), uint32(0), false
	var start []byte
	for _, s := range secs {
		switch s.id {
		case secImport:
			var mems uint32
			importedGlobals, mems, err = countImports(s.body)
			hasMemory = hasMemory || mems > 0
		case secMemory:
			hasMemory = hasMemory || (&reader{b: s.body}).u32() > 0
		case secGlobal:
			globals, err = (&reader{b: s.body}).u32(), nil
		case secStart:
			start = s.body
		case secExport:
			if bytes.Contains(s.body, []byte(stopExport)) {
				err = fmt.Errorf("%w: it already exports %s", errInstrument, stopExport)
			}
		}
		if err != nil {
			return nil, false, err
		}
	}
	if !hasMemory {
		return nil, false, fmt.Errorf("%w: it has no memory", errInstrument)
	}
	stop, fuel := uleb(uint64(importedGlobals+globals)), uleb(uint64(importedGlobals+globals+1))
	stopIndex := importedGlobals + globals
	var inject []byte
	for _, part := range [][]byte{
		{0x23}, fuel, {0x45, 0x04, 0x40}, // global.get $fuel; i32.eqz; if
		{0x41}, uleb(checkEvery), {0x24}, fuel, // i32.const checkEvery; global.set $fuel
		{0x41, 0x00, 0x40, 0x00, 0x1A},         // i32.const 0; memory.grow 0; drop
		{0x23}, stop, {0x04, 0x40, 0x00, 0x0B}, // global.get $stop; if unreachable end
		{0x0B},                                       // end
		{0x23}, fuel, {0x41, 0x01, 0x6B, 0x24}, fuel, // global.get $fuel; i32.const 1; i32.sub; global.set $fuel
	} {
		inject = append(inject, part...)
	}
	// mut i32 = 0, mut i32 = checkEvery
	newGlobals := [][]byte{{0x7F, 0x01, 0x41, 0x00, 0x0B}, append(append([]byte{0x7F, 0x01, 0x41}, uleb(checkEvery)...), 0x0B)}
	newExports := [][]byte{exportEntry(stopExport, 3, stopIndex)}
	if start != nil {
		newExports = append(newExports, exportEntry(startExport, 0, (&reader{b: start}).u32()))
	}

	w := bytes.NewBuffer(make([]byte, 0, len(module)+len(module)/16))
	w.Write(module[:8])
	doneGlobal, doneExport := false, false
	emit := func(id byte, body []byte) {
		w.WriteByte(id)
		w.Write(uleb(uint64(len(body))))
		w.Write(body)
	}
	flush := func(rank int) {
		if !doneGlobal && rank > sectionRank[secGlobal] {
			emit(secGlobal, vecOf(0, nil, newGlobals...))
			doneGlobal = true
		}
		if !doneExport && rank > sectionRank[secExport] {
			emit(secExport, vecOf(0, nil, newExports...))
			doneExport = true
		}
	}
	for _, s := range secs {
		if s.id == secCustom {
			// DWARF refers to code offsets the rewrite moves.
			if name := (&reader{b: s.body}).name(); strings.HasPrefix(name, ".debug_") {
				continue
			}
			w.WriteByte(s.id)
			w.Write(uleb(uint64(len(s.body))))
			w.Write(s.body)
			continue
		}
		flush(sectionRank[s.id])
		switch s.id {
		case secGlobal:
			n, rest := splitCount(s.body)
			emit(secGlobal, vecOf(n, rest, newGlobals...))
			doneGlobal = true
		case secExport:
			n, rest := splitCount(s.body)
			emit(secExport, vecOf(n, rest, newExports...))
			doneExport = true
		case secStart:
			// Dropped: exported as startExport instead.
		case secCode:
			body, err := instrumentCode(s.body, inject)
			if err != nil {
				return nil, false, err
			}
			emit(secCode, body)
		default:
			emit(s.id, s.body)
		}
	}
	flush(1 << 30)
	return w.Bytes(), start != nil, nil
}

func countImports(b []byte) (globals, memories uint32, err error) {
	r := &reader{b: b}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0: // func
			r.u32()
		case 1: // table
			r.valtype()
			r.limits()
		case 2: // memory
			r.limits()
			memories++
		case 3: // global
			r.valtype()
			r.byte()
			globals++
		case 4: // tag
			r.byte()
			r.u32()
		default:
			return 0, 0, fmt.Errorf("%w: import kind %d", errInstrument, kind)
		}
	}
	return globals, memories, r.err
}

func exportEntry(name string, kind byte, index uint32) []byte {
	b := append(uleb(uint64(len(name))), name...)
	b = append(b, kind)
	return append(b, uleb(uint64(index))...)
}

func splitCount(b []byte) (uint32, []byte) {
	r := &reader{b: b}
	n := r.u32()
	return n, b[r.i:]
}

// vecOf is a vector of n existing entries (encoded in rest) plus extra.
func vecOf(n uint32, rest []byte, extra ...[]byte) []byte {
	b := uleb(uint64(n) + uint64(len(extra)))
	b = append(b, rest...)
	for _, e := range extra {
		b = append(b, e...)
	}
	return b
}

// instrumentCode inserts inject after every loop's block type.
func instrumentCode(b []byte, inject []byte) ([]byte, error) {
	r := &reader{b: b}
	n := r.u32()
	out := append(make([]byte, 0, len(b)+len(b)/8), uleb(uint64(n))...)
	var body []byte
	for ; n > 0 && r.err == nil; n-- {
		size := r.u32()
		fr := &reader{b: r.bytes(int(size))}
		if r.err != nil {
			break
		}
		for locals := fr.u32(); locals > 0 && fr.err == nil; locals-- {
			fr.u32()
			fr.valtype()
		}
		body = append(body[:0], fr.b[:fr.i]...)
		last := fr.i
		for fr.i < len(fr.b) && fr.err == nil {
			op := fr.byte()
			fr.immediates(op)
			if op == 0x03 && fr.err == nil {
				body = append(body, fr.b[last:fr.i]...)
				body = append(body, inject...)
				last = fr.i
			}
		}
		if fr.err != nil {
			return nil, fr.err
		}
		body = append(body, fr.b[last:]...)
		out = append(out, uleb(uint64(len(body)))...)
		out = append(out, body...)
	}
	return out, r.err
}

func uleb(v uint64) []byte {
	return binary.AppendUvarint(nil, v)
}
