---@brief Ghost text drawn with extmarks (the default backend on every Neovim version).
---
--- A suggestion is anchored where it was asked for; while the user types the characters it starts
--- with, the rest stays shown (and a partial accept is just that: typing part of it). A key that does
--- not fit it hides it at once; an answer to a request older than the text, the cursor or a dismiss
--- is dropped.
---
--- While a slow answer is computed, the server's canvas as it settles (`dgemma/resolving`) is drawn at
--- the cursor as a partial: the settled runs as ghost text, the rest dimmer. A partial is only drawn:
--- no key accepts it, any key typed removes it, and a newer request or the answer replaces it. The
--- answer's low-confidence parts (`dgemma/confidence`) are drawn dimmer too.

local config_mod = require("dgemma.config")
local lsp = require("dgemma.lsp")
local text = require("dgemma.text")
local log = require("dgemma.log")

local M = {}

local ns = vim.api.nvim_create_namespace("dgemma.ghost")
local partial_ns = vim.api.nvim_create_namespace("dgemma.partial")
local augroup = vim.api.nvim_create_augroup("dgemma.ghost", { clear = true })

---@class dgemma.GhostState
---@field items string[]            candidate texts
---@field lows [integer, integer][][] per candidate, its low-confidence byte ranges (0-based, half-open)
---@field asked { row: integer, col: integer, tick: integer, at: number }|nil the request in flight: where, when
---@field pending_low table<string, [integer, integer][]> low ranges by insertText, for the coming answer
---@field index integer             the shown candidate
---@field anchor [integer, integer] 0-based row, byte column the candidates were made for
---@field request_id integer|nil
---@field client_id integer|nil
---@field timer uv.uv_timer_t|nil
---@field tick integer              changedtick the request was sent at
---@field generation integer        bumped by each request and each clear: older answers are dropped
---@field shown_at number           when the shown suggestion was first drawn (ms, a monotonic clock)
---@field quiet boolean             the next change is the key's own (a Tab that indented): no request

---@type table<integer, dgemma.GhostState>
local states = {}

local config ---@type dgemma.Config

local function state(bufnr)
  states[bufnr] = states[bufnr]
    or { items = {}, lows = {}, pending_low = {}, index = 1, anchor = { 0, 0 }, tick = -1, generation = 0, shown_at = 0, quiet = false }
  return states[bufnr]
end

local function now_ms()
  return vim.uv.hrtime() / 1e6
end

local function cursor(bufnr)
  local win = vim.fn.bufwinid(bufnr)
  local row, col = unpack(vim.api.nvim_win_get_cursor(win ~= -1 and win or 0))
  return row - 1, col
end

---The part of the shown candidate still to insert at the cursor, or nil.
---@param bufnr integer
---@return string|nil
function M.remaining(bufnr)
  local s = states[bufnr]
  if not s or #s.items == 0 then
    return nil
  end
  local row, col = cursor(bufnr)
  local arow, acol = s.anchor[1], s.anchor[2]
  if row < arow or (row == arow and col < acol) then
    return nil
  end
  local ok, typed = pcall(vim.api.nvim_buf_get_text, bufnr, arow, acol, row, col, {})
  if not ok then
    return nil
  end
  local rest = text.remaining(s.items[s.index], table.concat(typed, "\n"))
  if rest == nil or rest == "" then
    return nil
  end
  return rest
end

local function hide(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
end

local function hide_partial(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, partial_ns, 0, -1)
end

---`piece` split into its lines, each a list of virt_text chunks: the bytes inside `dim` (ranges of the
---text `piece` ends, `offset` bytes into it) in `dim_hl`, the others in DgemmaSuggestion.
---@param piece string
---@param dim [integer, integer][]
---@param offset integer
---@param dim_hl string
---@return table[][]
local function chunked_lines(piece, dim, offset, dim_hl)
  local lines, line, run, run_hl = {}, {}, {}, nil
  local function flush()
    if #run > 0 then
      line[#line + 1] = { table.concat(run), run_hl }
      run = {}
    end
  end
  for i = 1, #piece do
    local char = piece:sub(i, i)
    if char == "\n" then
      flush()
      lines[#lines + 1] = line
      line = {}
    else
      local at = offset + i - 1
      local hl = "DgemmaSuggestion"
      for _, range in ipairs(dim) do
        if at >= range[1] and at < range[2] then
          hl = dim_hl
          break
        end
      end
      if hl ~= run_hl then
        flush()
        run_hl = hl
      end
      run[#run + 1] = char
    end
  end
  flush()
  lines[#lines + 1] = line
  return lines
end

---Screen rows below the cursor's in its window, after scrolling it up (the cursor kept on the screen)
---until `wanted` rows are free or it cannot go further.
---@param win integer
---@param wanted integer
---@return integer
local function make_room(win, wanted)
  return vim.api.nvim_win_call(win, function()
    local free = function()
      return vim.api.nvim_win_get_height(win) - vim.fn.winline()
    end
    local scrolloff = vim.wo[win].scrolloff
    while free() < wanted and vim.fn.winline() - 1 > scrolloff do
      local view = vim.fn.winsaveview()
      if view.topline >= vim.fn.line(".") then
        break
      end
      vim.fn.winrestview({ topline = view.topline + 1 })
    end
    return free()
  end)
end

---Cuts the shown candidate so that its rest is `rest`: Tab inserts what is drawn, nothing more.
local function keep_only(bufnr, rest)
  local s = states[bufnr]
  local item = s.items[s.index]
  local full_rest = M.remaining(bufnr) or ""
  s.items[s.index] = item:sub(1, #item - #full_rest) .. rest
end

---Draws the rest of the shown candidate at the cursor (the one place ghost text is drawn): its first
---line inline, the others as virtual lines below, the window scrolled to show them all.
local function render(bufnr)
  hide(bufnr)
  local rest = M.remaining(bufnr)
  if rest == nil or vim.api.nvim_get_mode().mode:sub(1, 1) ~= "i" then
    return
  end
  local s = states[bufnr]
  hide_partial(bufnr) -- the answer replaces the partial
  local lines = vim.split(rest, "\n", { plain = true })
  local win = vim.fn.bufwinid(bufnr)
  if #lines > 1 and win ~= -1 then
    local room = make_room(win, #lines - 1)
    if room < #lines - 1 then
      rest = table.concat(vim.list_slice(lines, 1, room + 1), "\n")
      keep_only(bufnr, rest)
    end
  end
  local offset = #s.items[s.index] - #rest -- the low ranges are of the whole candidate
  local chunks = chunked_lines(rest, s.lows[s.index] or {}, offset, "DgemmaSuggestionLow")
  local first = chunks[1]
  if #s.items > 1 then
    first[#first + 1] = { (" (%d/%d)"):format(s.index, #s.items), "DgemmaSuggestionInfo" }
  end
  local virt_lines = {}
  for i = 2, #chunks do
    virt_lines[#virt_lines + 1] = chunks[i]
  end
  local row, col = cursor(bufnr)
  vim.api.nvim_buf_set_extmark(bufnr, ns, row, col, {
    virt_text = first,
    virt_text_pos = "inline",
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    -- Only the ghost's own colours: "combine" took MatchParen's over it after a typed closing bracket,
    -- drawing the rest bold and in the code's colour.
    hl_mode = "replace",
    priority = 200,
  })
end

function M.clear(bufnr)
  local s = states[bufnr]
  if s then
    s.items = {}
    s.lows = {}
    s.index = 1
    s.asked = nil
    s.generation = s.generation + 1
    local client = s.client_id and vim.lsp.get_client_by_id(s.client_id)
    if client and s.request_id then
      lsp.cancel(client, s.request_id)
    end
    s.request_id = nil
    if s.timer then
      s.timer:stop()
    end
  end
  hide(bufnr)
  hide_partial(bufnr)
end

local function item_text(bufnr, client, item, row, col)
  local insert = item.insertText
  if type(insert) == "table" then
    insert = insert.value -- a snippet: shown and inserted as plain text
  end
  if type(insert) ~= "string" or insert == "" then
    return nil
  end
  local range = item.range
  if range and range ~= vim.NIL then
    -- The item replaces [range.start, cursor): what the buffer already has there must be its start.
    local srow = range.start.line
    local scol = lsp.to_byte_col(bufnr, srow, range.start.character, client.offset_encoding)
    if srow ~= row or scol > col then
      return nil
    end
    local typed = vim.api.nvim_buf_get_text(bufnr, srow, scol, row, col, {})
    return text.remaining(insert, table.concat(typed, "\n"))
  end
  return insert
end

local INVOKED, AUTOMATIC = 1, 2 -- InlineCompletionTriggerKind: the user asked (a key), or typed

---Asks for a suggestion at the cursor; `kind` INVOKED when the user asked for it with a key.
---@param bufnr integer
---@param kind integer
local function request(bufnr, kind)
  local client = lsp.client(bufnr)
  if not client or not config.inline.enabled or vim.b[bufnr].dgemma_disabled then
    return
  end
  local s = state(bufnr)
  if s.request_id then
    lsp.cancel(client, s.request_id)
  end
  local row, col = cursor(bufnr)
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = lsp.position(client, bufnr),
    context = { triggerKind = kind },
  }
  s.client_id = client.id
  s.generation = s.generation + 1
  s.asked, s.pending_low = { row = row, col = col, tick = tick, at = now_ms() }, {}
  hide_partial(bufnr) -- a newer request replaces the partial of the one before
  local generation = s.generation
  local request_id
  request_id = lsp.request(client, "textDocument/inlineCompletion", params, function(err, result)
    if s.generation ~= generation then
      return -- a newer request, or a dismiss, came after this one (a cancelled request may still answer)
    end
    local asked_at = s.asked and s.asked.at or now_ms()
    s.request_id, s.asked = nil, nil
    hide_partial(bufnr)
    local pending_low = s.pending_low
    s.pending_low = {}
    if err then
      log.debug("inlineCompletion error: " .. vim.inspect(err))
      return
    end
    -- Stale: the text or the cursor moved while the server worked.
    local nrow, ncol = cursor(bufnr)
    if vim.api.nvim_buf_get_changedtick(bufnr) ~= tick or nrow ~= row or ncol ~= col then
      log.debug(("answer at %d:%d dropped: the text or the cursor moved"):format(row + 1, col))
      return
    end
    local items, lows = {}, {}
    for _, item in ipairs(result and (result.items or result) or {}) do
      local candidate = item_text(bufnr, client, item, row, col)
      if candidate and candidate ~= "" then
        items[#items + 1] = candidate
        -- The low ranges are of insertText; the candidate is its end (what was typed of it dropped).
        local cut = type(item.insertText) == "string" and #item.insertText - #candidate or 0
        local low = {}
        for _, range in ipairs(pending_low[item.insertText] or {}) do
          low[#low + 1] = { range[1] - cut, range[2] - cut }
        end
        lows[#lows + 1] = low
      end
    end
    local before = M.remaining(bufnr)
    s.items, s.lows, s.index, s.anchor, s.tick = items, lows, 1, { row, col }, tick
    if M.remaining(bufnr) ~= before then
      s.shown_at = now_ms() -- a new suggestion (the rest of one typed through is the same)
    end
    render(bufnr)
    log.debug(("answer at %d:%d (%s): %d suggestion(s) after %d ms"):format(
      row + 1, col, kind == INVOKED and "asked" or "typed", #items, now_ms() - asked_at))
  end, bufnr)
  s.request_id = request_id
  log.debug(("request %s at %d:%d"):format(tostring(request_id), row + 1, col))
end

---The buffer and state of a notification about the request in flight, or nil when it is about another
---(an older request, a cancelled one) or the text or the cursor moved since it was sent.
---@param params table
---@return integer|nil, dgemma.GhostState|nil
local function in_flight(params)
  local uri = type(params.textDocument) == "table" and params.textDocument.uri
  -- Among the buffers with a request (vim.uri_to_bufnr would make a buffer for a uri that has none).
  local bufnr, s
  for candidate, state in pairs(states) do
    local asking = state.request_id ~= nil and vim.api.nvim_buf_is_valid(candidate)
    if asking and vim.uri_from_bufnr(candidate) == uri then
      bufnr, s = candidate, state
    end
  end
  if not s or s.request_id == nil or params.requestId ~= s.request_id or not s.asked then
    return nil
  end
  local row, col = cursor(bufnr)
  if vim.api.nvim_buf_get_changedtick(bufnr) ~= s.asked.tick or row ~= s.asked.row or col ~= s.asked.col then
    return nil
  end
  return bufnr, s
end

---`dgemma/resolving`: draws the canvas so far at the cursor, settled runs as ghost text, the rest dimmer.
---@param params { requestId: integer, spans: { text: string, settled: boolean }[] }
function M.on_resolving(params)
  local bufnr, s = in_flight(params)
  if not bufnr or not s or M.visible(bufnr) or vim.api.nvim_get_mode().mode:sub(1, 1) ~= "i" then
    return
  end
  local pieces, unsettled, at = {}, {}, 0
  for _, span in ipairs(type(params.spans) == "table" and params.spans or {}) do
    if type(span.text) == "string" then
      pieces[#pieces + 1] = span.text
      if not span.settled then
        unsettled[#unsettled + 1] = { at, at + #span.text }
      end
      at = at + #span.text
    end
  end
  hide_partial(bufnr)
  local canvas = table.concat(pieces)
  if canvas == "" then
    return
  end
  local chunks = chunked_lines(canvas, unsettled, 0, "DgemmaSuggestionUnsettled")
  local row, col = cursor(bufnr)
  vim.api.nvim_buf_set_extmark(bufnr, partial_ns, row, col, {
    virt_text = chunks[1],
    virt_text_pos = "inline",
    virt_lines = #chunks > 1 and vim.list_slice(chunks, 2) or nil,
    hl_mode = "replace",
    priority = 200,
  })
  log.debug(("partial of request %s at %d:%d: %d bytes after %d ms"):format(
    tostring(s.request_id), row + 1, col, #canvas, now_ms() - s.asked.at))
end

---`dgemma/confidence` (right before the answer): keeps each item's low ranges, as byte ranges, for it.
---@param params { requestId: integer, items: { insertText: string, low: [integer, integer][] }[] }
function M.on_confidence(params)
  local bufnr, s = in_flight(params)
  if not bufnr or not s then
    return
  end
  local client = s.client_id and vim.lsp.get_client_by_id(s.client_id)
  local encoding = client and client.offset_encoding or "utf-16"
  for _, item in ipairs(type(params.items) == "table" and params.items or {}) do
    if type(item.insertText) == "string" and type(item.low) == "table" then
      local ranges = {}
      for _, range in ipairs(item.low) do
        ranges[#ranges + 1] = {
          lsp.text_byte_index(item.insertText, range[1], encoding),
          lsp.text_byte_index(item.insertText, range[2], encoding),
        }
      end
      s.pending_low[item.insertText] = ranges
    end
  end
end

local function schedule(bufnr)
  local s = state(bufnr)
  if s.timer == nil then
    s.timer = vim.uv.new_timer()
  end
  s.timer:stop()
  if config_mod.manual(config) then
    return -- only the suggest key asks
  end
  s.timer:start(config.inline.debounce_ms, 0, vim.schedule_wrap(function()
    if vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_get_mode().mode:sub(1, 1) == "i"
      and vim.api.nvim_get_current_buf() == bufnr then
      request(bufnr, AUTOMATIC)
    end
  end))
end

---Asks at the cursor now (the model became ready while the user was typing in insert mode).
---@param bufnr integer
function M.ask(bufnr)
  if states[bufnr] and vim.api.nvim_get_mode().mode:sub(1, 1) == "i" and not config_mod.manual(config) then
    request(bufnr, AUTOMATIC)
  end
end

---Asks at the cursor now because the user pressed the key for it: the server shows what it has,
---whatever its eagerness (and with trigger "manual"). Returns false outside insert mode.
---@param bufnr integer
---@return boolean
function M.suggest(bufnr)
  local s = states[bufnr]
  if not s or vim.api.nvim_get_mode().mode:sub(1, 1) ~= "i" then
    return false
  end
  if s.timer then
    s.timer:stop() -- this request replaces the one the last key would have made
  end
  request(bufnr, INVOKED)
  return true
end

---The key about to be typed (a Tab that indents) asks for no suggestion: what it changes is not code
---to complete. Neovim runs the key and its autocommands before the next scheduled callback.
---@param bufnr integer
function M.quiet(bufnr)
  local s = state(bufnr)
  s.quiet = true
  vim.schedule(function()
    s.quiet = false
  end)
end

---@param bufnr integer
---@param opts dgemma.Config
function M.attach(bufnr, opts)
  config = opts
  state(bufnr)
  vim.api.nvim_clear_autocmds({ group = augroup, buffer = bufnr })
  vim.api.nvim_create_autocmd({ "InsertEnter", "TextChangedI", "CursorMovedI" }, {
    group = augroup,
    buffer = bufnr,
    callback = function()
      local s = state(bufnr)
      hide_partial(bufnr) -- any key removes a partial: the request it was for is out of date
      render(bufnr) -- keeps what was typed through, hides what no longer fits
      if s.quiet and s.timer then
        s.timer:stop()
      elseif not s.quiet then
        schedule(bufnr)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = augroup,
    buffer = bufnr,
    callback = function()
      M.clear(bufnr)
    end,
  })
end

function M.detach(bufnr)
  M.clear(bufnr)
  vim.api.nvim_clear_autocmds({ group = augroup, buffer = bufnr })
  local s = states[bufnr]
  if s and s.timer then
    s.timer:close()
  end
  states[bufnr] = nil
end

function M.visible(bufnr)
  return M.remaining(bufnr) ~= nil
end

---Whether a request is due: the debounce timer after a key runs.
---@param bufnr integer
function M.due(bufnr)
  local s = states[bufnr]
  return s ~= nil and s.timer ~= nil and s.timer:is_active()
end

---Whether the shown suggestion has been on the screen long enough to have been read.
---@param bufnr integer
function M.readable(bufnr)
  local s = states[bufnr]
  return M.visible(bufnr) and now_ms() - s.shown_at >= config.inline.accept_after_ms
end

local function insert(bufnr, piece)
  local row, col = cursor(bufnr)
  local lines = vim.split(piece, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
  local last = #lines == 1 and col + #lines[1] or #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { row + #lines, last })
end

---Inserts all, a word or a line of the suggestion; returns false when none is shown, or one shown too
---recently to have been read (the key then does what it does without a suggestion).
---@param bufnr integer
---@param how "all"|"word"|"line"
---@return boolean
function M.accept(bufnr, how)
  local rest = M.remaining(bufnr)
  if rest == nil or not M.readable(bufnr) then
    return false
  end
  local piece = how == "word" and text.next_word(rest) or how == "line" and text.next_line(rest) or rest
  insert(bufnr, piece)
  if how == "all" or piece == rest then
    M.clear(bufnr)
  else
    render(bufnr)
  end
  return true
end

---@param bufnr integer
---@param step integer
function M.cycle(bufnr, step)
  local s = states[bufnr]
  if not s or #s.items < 2 then
    return M.visible(bufnr)
  end
  s.index = (s.index - 1 + step) % #s.items + 1
  s.shown_at = now_ms()
  render(bufnr)
  return true
end

function M.dismiss(bufnr)
  if not M.visible(bufnr) then
    return false
  end
  M.clear(bufnr)
  return true
end

return M
