package clients

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// rdkafkaVersionOf reads librdkafka's version from an ELF file (the shared
// library, or an executable that links it statically, as confluent-kafka-go
// does): the constant that rd_kafka_version() returns.
//
// Written by hand because nothing else says it: librdkafka builds its
// version string at run time (rd_kafka_version_str, src/rdkafka.c) from
// RD_KAFKA_VERSION (0xMMmmrrpp, src/rdkafka.h), which the compiler turns
// into the immediate of rd_kafka_version()'s one instruction; Debian's
// librdkafka.so.1 has no version text and its file name has only the soname.
// So the function's first instructions are decoded: x86-64's `mov eax,
// imm32; ret` (b8 ff 02 00 02 c3 for 2.0.2) and arm64's `movz w0; movk w0,
// lsl 16; ret`.
func rdkafkaVersionOf(file string) (version, where string, err error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	code, err := symbolCode(f, "rd_kafka_version", 32)
	if err != nil {
		return "", "", err
	}
	v, err := decodeReturnConst(f.Machine, code)
	if err != nil {
		return "", "", fmt.Errorf("rd_kafka_version(): %w", err)
	}
	return rdkafkaVersionString(v), "rd_kafka_version() constant", nil
}

// errNoSymbol: the ELF file does not define the symbol.
var errNoSymbol = errors.New("no rd_kafka_version symbol")

// symbolCode returns up to n bytes of a function's code, found in the
// dynamic symbol table or the static one.
func symbolCode(f *elf.File, name string, n int) ([]byte, error) {
	var syms []elf.Symbol
	if ds, err := f.DynamicSymbols(); err == nil {
		syms = append(syms, ds...)
	}
	if ss, err := f.Symbols(); err == nil {
		syms = append(syms, ss...)
	}
	for _, s := range syms {
		if s.Name != name || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF || s.Value == 0 {
			continue
		}
		for _, sec := range f.Sections {
			if sec.Type != elf.SHT_PROGBITS || s.Value < sec.Addr || s.Value >= sec.Addr+sec.Size {
				continue
			}
			off := s.Value - sec.Addr
			size := min(uint64(n), sec.Size-off)
			buf := make([]byte, size)
			if _, err := sec.ReadAt(buf, int64(off)); err != nil {
				return nil, err
			}
			return buf, nil
		}
		return nil, fmt.Errorf("symbol %s at %#x is in no section", name, s.Value)
	}
	return nil, errNoSymbol
}

// decodeReturnConst decodes a function that returns a 32-bit constant.
func decodeReturnConst(m elf.Machine, code []byte) (uint32, error) {
	switch m {
	case elf.EM_X86_64, elf.EM_386:
		// endbr64/endbr32 (f3 0f 1e fa/fb) may come first under CET.
		if len(code) >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && (code[3] == 0xfa || code[3] == 0xfb) {
			code = code[4:]
		}
		if len(code) >= 6 && code[0] == 0xb8 && code[5] == 0xc3 {
			return binary.LittleEndian.Uint32(code[1:5]), nil
		}
		return 0, fmt.Errorf("not mov eax, imm32; ret: % x", code[:min(len(code), 8)])
	case elf.EM_AARCH64:
		var v uint32
		set := false
		for i := 0; i+4 <= len(code); i += 4 {
			ins := binary.LittleEndian.Uint32(code[i:])
			switch {
			case ins == 0xd503245f || ins == 0xd503233f: // bti c, paciasp
			case ins&0xffe0001f == 0x52800000 || ins&0xffe0001f == 0x52a00000: // movz w0, #imm{, lsl 16}
				v = uint32(ins>>5&0xffff) << (16 * (ins >> 21 & 1))
				set = true
			case ins&0xffe0001f == 0x72a00000 || ins&0xffe0001f == 0x72800000: // movk w0, #imm{, lsl 16}
				sh := 16 * (ins >> 21 & 1)
				v = v&^(0xffff<<sh) | uint32(ins>>5&0xffff)<<sh
			case ins == 0xd65f03c0 || ins == 0xd65f0bff: // ret, retaa
				if set {
					return v, nil
				}
				return 0, errors.New("ret before a constant")
			default:
				return 0, fmt.Errorf("unexpected instruction %#08x", ins)
			}
		}
		return 0, errors.New("no ret")
	}
	return 0, fmt.Errorf("cannot decode %s code", m)
}

// rdkafkaVersionString writes RD_KAFKA_VERSION as rd_kafka_version_str
// does: major.minor.revision, then -preN or -RCN unless the last byte is
// 0xff (src/rdkafka.c).
func rdkafkaVersionString(v uint32) string {
	s := fmt.Sprintf("%d.%d.%d", v>>24&0xff, v>>16&0xff, v>>8&0xff)
	switch prel := v & 0xff; {
	case prel == 0xff:
	case prel <= 200:
		s += fmt.Sprintf("-pre%d", prel)
	default:
		s += fmt.Sprintf("-RC%d", prel-200)
	}
	return s
}
