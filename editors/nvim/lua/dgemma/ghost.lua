---@brief Ghost text drawn with extmarks (the default backend on every Neovim version).
---
--- A suggestion is anchored where it was asked for; while the user types the characters it starts
--- with, the rest stays shown (and a partial accept is just that: typing part of it). A key that does
--- not fit it hides it at once; an answer to a request older than the text, the cursor or a dismiss
--- is dropped.

local config_mod = require("dgemma.config")
local lsp = require("dgemma.lsp")
local text = require("dgemma.text")
local log = require("dgemma.log")

local M = {}

local ns = vim.api.nvim_create_namespace("dgemma.ghost")
local augroup = vim.api.nvim_create_augroup("dgemma.ghost", { clear = true })

---@class dgemma.GhostState
---@field items string[]            candidate texts
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
    or { items = {}, index = 1, anchor = { 0, 0 }, tick = -1, generation = 0, shown_at = 0, quiet = false }
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
  local lines = vim.split(rest, "\n", { plain = true })
  local win = vim.fn.bufwinid(bufnr)
  if #lines > 1 and win ~= -1 then
    local room = make_room(win, #lines - 1)
    if room < #lines - 1 then
      lines = vim.list_slice(lines, 1, room + 1)
      keep_only(bufnr, table.concat(lines, "\n"))
    end
  end
  local first = { { lines[1], "DgemmaSuggestion" } }
  if #s.items > 1 then
    first[#first + 1] = { (" (%d/%d)"):format(s.index, #s.items), "DgemmaSuggestionInfo" }
  end
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], "DgemmaSuggestion" } }
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
    s.index = 1
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
  local generation = s.generation
  s.request_id = lsp.request(client, "textDocument/inlineCompletion", params, function(err, result)
    if s.generation ~= generation then
      return -- a newer request, or a dismiss, came after this one (a cancelled request may still answer)
    end
    s.request_id = nil
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
    local items = {}
    for _, item in ipairs(result and (result.items or result) or {}) do
      local candidate = item_text(bufnr, client, item, row, col)
      if candidate and candidate ~= "" then
        items[#items + 1] = candidate
      end
    end
    local before = M.remaining(bufnr)
    s.items, s.index, s.anchor, s.tick = items, 1, { row, col }, tick
    if M.remaining(bufnr) ~= before then
      s.shown_at = now_ms() -- a new suggestion (the rest of one typed through is the same)
    end
    render(bufnr)
    log.debug(("answer at %d:%d (%s): %d suggestion(s)"):format(
      row + 1, col, kind == INVOKED and "asked" or "typed", #items))
  end, bufnr)
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
