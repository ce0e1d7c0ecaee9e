-- SPDX-License-Identifier: BSD-3-Clause
-- Wireshark / tshark dissector for imago's frames, every field of docs/PROTOCOL.md:
--   the link header (EtherType 0x88B5, or UDP port 47000), the authentication tag (1.5),
--   raw test payloads (2), reliability frames: FrameHeader, SACK ranges, records (3.2),
--   and inside each whole message the endpoint tag and the control channel's OPEN/CLOSE (4).
-- Use: tshark -X lua_script:imago.lua -r capture.pcapng, or install it into a Wireshark
-- plugin folder (meson install puts it in Wireshark's global Lua one). Another UDP port:
-- Wireshark's "Decode As", or edit IMAGO_UDP_PORT below.

local IMAGO_ETHERTYPE = 0x88B5
local IMAGO_UDP_PORT = 47000

local imago = Proto("imago", "imago reliable message transport")

local link_types = { [1] = "raw test payload", [2] = "reliability frame" }
local frame_types = { [1] = "HELLO", [2] = "HELLO_ACK", [3] = "DATA", [4] = "ACK" }
local ctl_ops = { [1] = "OPEN", [2] = "CLOSE" }

local f = imago.fields
-- 1.3 link header, 1.5 tag
f.link_version = ProtoField.uint8("imago.link.version", "Link version")
f.link_type = ProtoField.uint8("imago.link.type", "Link type", base.DEC, link_types, 0x7f)
f.link_auth = ProtoField.bool("imago.link.auth", "Authentication tag follows", 8, nil, 0x80)
f.link_length = ProtoField.uint16("imago.link.length", "Payload length")
f.auth_tag = ProtoField.bytes("imago.auth.tag", "Authentication tag (BLAKE2b-128)")
-- 2 raw test payload
f.raw_seq = ProtoField.uint64("imago.raw.seq", "Sequence")
f.raw_check = ProtoField.uint32("imago.raw.check", "Check (CRC32C)", base.HEX)
f.raw_flags = ProtoField.uint16("imago.raw.flags", "Flags", base.HEX)
f.raw_fin = ProtoField.bool("imago.raw.fin", "FIN", 16, nil, 0x0001)
f.raw_length = ProtoField.uint16("imago.raw.length", "Length")
f.raw_filler = ProtoField.bytes("imago.raw.filler", "Filler")
-- 3.2.1 FrameHeader
f.version = ProtoField.uint8("imago.rel.version", "Version")
f.type = ProtoField.uint8("imago.rel.type", "Type", base.DEC, frame_types)
f.flags = ProtoField.uint8("imago.rel.flags", "Flags", base.HEX)
f.flag_ack_req = ProtoField.bool("imago.rel.flags.ack_req", "ACK_REQ", 8, nil, 0x01)
f.flag_nack = ProtoField.bool("imago.rel.flags.nack", "NACK", 8, nil, 0x02)
f.flag_crc = ProtoField.bool("imago.rel.flags.crc", "CRC", 8, nil, 0x04)
f.flag_sack_more = ProtoField.bool("imago.rel.flags.sack_more", "SACK_MORE", 8, nil, 0x08)
f.flag_sack_bitmap = ProtoField.bool("imago.rel.flags.sack_bitmap", "SACK_BITMAP", 8, nil, 0x10)
f.sack_count = ProtoField.uint8("imago.rel.sack_count", "SACK entries")
f.src_node = ProtoField.uint32("imago.rel.src_node", "Source node")
f.dst_node = ProtoField.uint32("imago.rel.dst_node", "Destination node")
f.src_epoch = ProtoField.uint32("imago.rel.src_epoch", "Source epoch")
f.src_token = ProtoField.uint64("imago.rel.src_token", "Source token", base.HEX)
f.dst_token = ProtoField.uint64("imago.rel.dst_token", "Destination token", base.HEX)
f.seq = ProtoField.uint32("imago.rel.seq", "Seq")
f.ack = ProtoField.uint32("imago.rel.ack", "Cumulative ACK")
f.credit = ProtoField.uint32("imago.rel.credit", "Credit (HELLO: attempt; HELLO_ACK: the attempt answered)")
f.crc = ProtoField.uint32("imago.rel.crc", "CRC32C", base.HEX)
f.hello_mtu = ProtoField.uint32("imago.rel.hello_mtu", "Frame size (HELLO body: the sender's, peers must agree)")
f.hello_max_message = ProtoField.uint32("imago.rel.hello_max_message", "Largest message the sender takes (HELLO body)")
f.records = ProtoField.uint32("imago.rel.records", "Records in this frame")
-- 3.2.2 SackRange
f.sack_start = ProtoField.uint32("imago.sack.start", "SACK start")
f.sack_end = ProtoField.uint32("imago.sack.end", "SACK end")
-- 3.2.2.1 SackWord (flag SACK_BITMAP)
f.sack_word = ProtoField.uint64("imago.sack.word", "SACK bitmap word", base.HEX)
-- 3.2.3 records
f.rec_flags = ProtoField.uint8("imago.rec.flags", "Record flags", base.HEX)
f.rec_more = ProtoField.bool("imago.rec.more", "MORE", 8, nil, 0x01)
f.rec_cont = ProtoField.bool("imago.rec.cont", "CONT", 8, nil, 0x02)
f.rec_seqf = ProtoField.bool("imago.rec.has_seq", "SEQ", 8, nil, 0x04)
f.rec_fast = ProtoField.bool("imago.rec.fast", "FAST", 8, nil, 0x08)
f.rec_seq = ProtoField.uint32("imago.rec.seq", "Unit seq")
f.rec_len = ProtoField.uint16("imago.rec.len", "Unit length")
f.rec_payload = ProtoField.bytes("imago.rec.payload", "Unit payload")
-- 4 endpoints
f.msg_tag = ProtoField.uint32("imago.msg.tag", "Endpoint tag", base.HEX)
f.msg_body = ProtoField.bytes("imago.msg.body", "Message body")
f.ctl_op = ProtoField.uint8("imago.ctl.op", "Control op", base.DEC, ctl_ops)
f.ctl_tag = ProtoField.uint32("imago.ctl.tag", "Announced endpoint tag", base.HEX)

local ef_bad = ProtoExpert.new("imago.malformed", "Malformed imago frame", expert.group.MALFORMED, expert.severity.ERROR)
imago.experts = { ef_bad }

local function dissect_raw(buf, tree)
  local t = tree:add(imago, buf(), "Raw test payload")
  if buf:len() < 16 then
    t:add_proto_expert_info(ef_bad, "shorter than 16 bytes")
    return "raw (short)"
  end
  t:add(f.raw_seq, buf(0, 8))
  t:add(f.raw_check, buf(8, 4))
  local fl = t:add(f.raw_flags, buf(12, 2))
  fl:add(f.raw_fin, buf(12, 2))
  t:add(f.raw_length, buf(14, 2))
  if buf:len() > 16 then t:add(f.raw_filler, buf(16)) end
  local fin = bit.band(buf(12, 2):uint(), 1) ~= 0
  return string.format("raw seq=%s%s", tostring(buf(0, 8):uint64()), fin and " FIN" or "")
end

-- A whole message: endpoint tag, then the body or a control message.
local function dissect_message(buf, tree)
  if buf:len() < 4 then return end
  tree:add(f.msg_tag, buf(0, 4))
  local tag = buf(0, 4):uint()
  if tag ~= 0 then
    if buf:len() > 4 then tree:add(f.msg_body, buf(4)) end
    return
  end
  if buf:len() >= 9 then
    tree:add(f.ctl_op, buf(4, 1))
    tree:add(f.ctl_tag, buf(5, 4))
  end
end

-- @return the number of records dissected.
local function dissect_records(buf, tree, first_seq)
  local off, n, seq = 0, 0, first_seq
  while off < buf:len() do
    local start = off
    local flags = buf(off, 1):uint()
    off = off + 1
    if bit.band(flags, 0x04) ~= 0 then
      if off + 4 > buf:len() then break end
      seq = buf(off, 4):uint()
      off = off + 4
    elseif n > 0 then
      seq = (seq + 1) % 4294967296
    end
    if off >= buf:len() then break end
    local len = buf(off, 1):uint()
    local len_bytes = 1
    if len == 0xFF then
      if off + 3 > buf:len() then break end
      len = buf(off + 1, 2):uint()
      len_bytes = 3
    end
    off = off + len_bytes
    if off + len > buf:len() then
      tree:add_proto_expert_info(ef_bad, "record longer than the frame")
      break
    end
    local r = tree:add(imago, buf(start, off - start + len), string.format("Record seq %d, %d bytes", seq, len))
    local rf = r:add(f.rec_flags, buf(start, 1))
    rf:add(f.rec_more, buf(start, 1))
    rf:add(f.rec_cont, buf(start, 1))
    rf:add(f.rec_seqf, buf(start, 1))
    rf:add(f.rec_fast, buf(start, 1))
    r:add(f.rec_seq, seq):set_generated(bit.band(flags, 0x04) == 0)
    r:add(f.rec_len, buf(off - len_bytes, len_bytes), len)
    if len > 0 then
      r:add(f.rec_payload, buf(off, len))
      -- A whole message (neither MORE nor CONT) or a first fragment starts with the tag.
      if bit.band(flags, 0x02) == 0 then dissect_message(buf(off, len), r) end
    end
    off = off + len
    n = n + 1
  end
  return n
end

local function dissect_reliability(buf, tree)
  local t = tree:add(imago, buf(), "Reliability frame")
  if buf:len() < 48 then
    t:add_proto_expert_info(ef_bad, "shorter than the 48-byte FrameHeader")
    return "reliability (short)"
  end
  local ftype = buf(1, 1):uint()
  t:add(f.version, buf(0, 1))
  t:add(f.type, buf(1, 1))
  local fl = t:add(f.flags, buf(2, 1))
  fl:add(f.flag_ack_req, buf(2, 1))
  fl:add(f.flag_nack, buf(2, 1))
  fl:add(f.flag_crc, buf(2, 1))
  fl:add(f.flag_sack_more, buf(2, 1))
  fl:add(f.flag_sack_bitmap, buf(2, 1))
  -- The rest of the 48 bytes, in order: field, offset, size.
  for _, x in ipairs({ { f.sack_count, 3, 1 }, { f.src_node, 4, 4 }, { f.dst_node, 8, 4 }, { f.src_epoch, 12, 4 },
                       { f.src_token, 16, 8 }, { f.dst_token, 24, 8 }, { f.seq, 32, 4 }, { f.ack, 36, 4 },
                       { f.credit, 40, 4 }, { f.crc, 44, 4 } }) do
    t:add(x[1], buf(x[2], x[3]))
  end
  local sacks = buf(3, 1):uint()
  local bitmap = bit.band(buf(2, 1):uint(), 0x10) ~= 0
  local off = 48
  for i = 1, sacks do
    if off + 8 > buf:len() then
      t:add_proto_expert_info(ef_bad, "SACK entries run past the frame")
      break
    end
    if bitmap then
      -- Bit j of word i: unit (ack rounded down to 64) + 64 i + j is held.
      local base = buf(36, 4):uint() - buf(36, 4):uint() % 64 + 64 * (i - 1)
      t:add(imago, buf(off, 8), string.format("SACK bitmap, units %d..%d", base, base + 63))
        :add(f.sack_word, buf(off, 8))
    else
      local s = t:add(imago, buf(off, 8), string.format("SACK %d..%d", buf(off, 4):uint(), buf(off + 4, 4):uint()))
      s:add(f.sack_start, buf(off, 4))
      s:add(f.sack_end, buf(off + 4, 4))
    end
    off = off + 8
  end
  local n = 0
  if ftype == 3 and off < buf:len() then n = dissect_records(buf(off), t, buf(32, 4):uint()) end
  local hello_mtu = nil
  if (ftype == 1 or ftype == 2) and off + 8 <= buf:len() then
    t:add(f.hello_mtu, buf(off, 4))
    t:add(f.hello_max_message, buf(off + 4, 4))
    hello_mtu = buf(off, 4):uint()
  end
  t:add(f.records, n):set_generated()
  local name = frame_types[ftype] or string.format("type %d", ftype)
  local info = string.format("%s %d->%d seq=%d ack=%d", name, buf(4, 4):uint(), buf(8, 4):uint(), buf(32, 4):uint(),
                             buf(36, 4):uint())
  if ftype == 3 then info = info .. string.format(" records=%d", n) end
  if hello_mtu ~= nil then info = info .. string.format(" mtu=%d", hello_mtu) end
  if sacks > 0 then info = info .. string.format(" sack=%d", sacks) end
  return info
end

function imago.dissector(buf, pinfo, tree)
  if buf:len() < 4 then return 0 end
  pinfo.cols.protocol = "imago"
  local t = tree:add(imago, buf(), "imago")
  t:add(f.link_version, buf(0, 1))
  t:add(f.link_type, buf(1, 1))
  t:add(f.link_auth, buf(1, 1))
  t:add(f.link_length, buf(2, 2))
  local ltype = bit.band(buf(1, 1):uint(), 0x7f)
  local auth = bit.band(buf(1, 1):uint(), 0x80) ~= 0
  local len = buf(2, 2):uint()
  if 4 + len > buf:len() then
    t:add_proto_expert_info(ef_bad, "link length past the frame")
    return buf:len()
  end
  local payload = len > 0 and buf(4, len) or nil
  local info
  if payload == nil then
    info = "empty"
  elseif ltype == 1 then
    info = dissect_raw(payload:tvb(), t)
  elseif ltype == 2 then
    info = dissect_reliability(payload:tvb(), t)
  else
    info = string.format("link type %d", ltype)
  end
  if auth then
    if 4 + len + 16 <= buf:len() then
      t:add(f.auth_tag, buf(4 + len, 16))
    else
      t:add_proto_expert_info(ef_bad, "authentication tag missing")
    end
  end
  pinfo.cols.info = info .. (auth and " [tagged]" or "")
  return buf:len()
end

DissectorTable.get("ethertype"):add(IMAGO_ETHERTYPE, imago)
DissectorTable.get("udp.port"):add(IMAGO_UDP_PORT, imago)
