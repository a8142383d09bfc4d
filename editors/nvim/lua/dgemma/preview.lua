---@brief Block rewrites (the server's refactor.rewrite code action) and next-edit suggestions
--- (`dgemma/nextEdit`), shown in the buffer as a diff: the replaced text struck through, the new
--- text as virtual text and lines. Nothing changes until the user accepts; any edit drops it.

local lsp = require("dgemma.lsp")
local log = require("dgemma.log")

local M = {}

local ns = vim.api.nvim_create_namespace("dgemma.preview")
local augroup = vim.api.nvim_create_augroup("dgemma.preview", { clear = true })
local METHOD_NOT_FOUND = -32601

---@class dgemma.Pending
---@field kind "rewrite"|"next_edit"
---@field bufnr integer
---@field tick integer
---@field edits table[]          LSP TextEdits
---@field encoding string
---@field saved table<string, table|false>  the buffer's own mappings the preview keys replaced

---@type table<integer, dgemma.Pending>
local pending = {}
local config ---@type dgemma.Config
local no_next_edit = false

function M.setup(opts)
  config = opts
end

---The suggestion shown in a buffer (0: the current one): its kind and LSP text edits, or nil.
---@return { kind: string, edits: table[] }|nil
function M.get(bufnr)
  local p = pending[(bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr]
  return p and { kind = p.kind, edits = p.edits } or nil
end

local function byte_pos(bufnr, position, encoding)
  local row = position.line
  local count = vim.api.nvim_buf_line_count(bufnr)
  if row >= count then
    local last = count - 1
    return last, #(vim.api.nvim_buf_get_lines(bufnr, last, last + 1, false)[1] or "")
  end
  return row, lsp.to_byte_col(bufnr, row, position.character, encoding)
end

local function restore_keys(p)
  for lhs, previous in pairs(p.saved) do
    pcall(vim.keymap.del, "n", lhs, { buffer = p.bufnr })
    if previous then
      vim.fn.mapset("n", false, previous)
    end
  end
end

---@param bufnr integer
---@param reason string
function M.clear(bufnr, reason)
  local p = pending[bufnr]
  if not p then
    return
  end
  pending[bufnr] = nil
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
    restore_keys(p)
    vim.api.nvim_clear_autocmds({ group = augroup, buffer = bufnr })
  end
  log.debug(("%s dropped: %s"):format(p.kind, reason))
end

local function draw(p)
  local bufnr = p.bufnr
  for i, edit in ipairs(p.edits) do
    local srow, scol = byte_pos(bufnr, edit.range.start, p.encoding)
    local erow, ecol = byte_pos(bufnr, edit.range["end"], p.encoding)
    if srow ~= erow or scol ~= ecol then
      vim.api.nvim_buf_set_extmark(bufnr, ns, srow, scol, {
        end_row = erow,
        end_col = ecol,
        hl_group = "DgemmaEditDelete",
        priority = 250,
      })
    end
    local lines = vim.split(edit.newText, "\n", { plain = true })
    local first = lines[1]
    local opts = { priority = 250 }
    if first ~= "" then
      opts.virt_text = { { first, "DgemmaEditAdd" } }
      opts.virt_text_pos = "inline"
    end
    if #lines > 1 then
      opts.virt_lines = {}
      for j = 2, #lines do
        opts.virt_lines[#opts.virt_lines + 1] = { { lines[j] == "" and " " or lines[j], "DgemmaEditAdd" } }
      end
    end
    vim.api.nvim_buf_set_extmark(bufnr, ns, erow, ecol, opts)
    if i == 1 then
      local hint = ("  dgemma %s: %s accept, %s reject"):format(
        p.kind == "rewrite" and "rewrite" or "next edit",
        config.keys.edit_accept or ":Dgemma accept_edit",
        config.keys.edit_reject or ":Dgemma reject_edit"
      )
      vim.api.nvim_buf_set_extmark(bufnr, ns, srow, 0, {
        virt_text = { { hint, "DgemmaEditHint" } },
        virt_text_pos = "eol",
      })
    end
  end
end

local function bind_keys(p)
  p.saved = {}
  local function bind(lhs, fn, desc)
    if not lhs then
      return
    end
    local previous = vim.fn.maparg(lhs, "n", false, true)
    p.saved[lhs] = (previous.buffer == 1) and previous or false
    vim.keymap.set("n", lhs, fn, { buffer = p.bufnr, nowait = true, desc = desc })
  end
  bind(config.keys.edit_accept, function() M.accept(p.bufnr) end, "dgemma: accept the suggested edit")
  bind(config.keys.edit_reject, function() M.reject(p.bufnr) end, "dgemma: reject the suggested edit")
end

---Shows `edits` (LSP TextEdits for the buffer) as a pending suggestion.
---@param bufnr integer
---@param kind "rewrite"|"next_edit"
---@param edits table[]
---@param encoding string
function M.show(bufnr, kind, edits, encoding)
  M.clear(bufnr, "replaced")
  table.sort(edits, function(a, b)
    local sa, sb = a.range.start, b.range.start
    return sa.line < sb.line or (sa.line == sb.line and sa.character < sb.character)
  end)
  local p = { kind = kind, bufnr = bufnr, tick = vim.api.nvim_buf_get_changedtick(bufnr), edits = edits, encoding = encoding }
  pending[bufnr] = p
  draw(p)
  bind_keys(p)
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI", "BufLeave" }, {
    group = augroup,
    buffer = bufnr,
    callback = function(event)
      if event.event == "BufLeave" or vim.api.nvim_buf_get_changedtick(bufnr) ~= p.tick then
        M.clear(bufnr, event.event)
      end
    end,
  })
  vim.api.nvim_exec_autocmds("User", { pattern = "DgemmaPreview", modeline = false })
end

---Applies the pending suggestion, if the buffer is still the one it was made for.
---@return boolean
function M.accept(bufnr)
  local p = pending[bufnr]
  if not p then
    return false
  end
  if vim.api.nvim_buf_get_changedtick(bufnr) ~= p.tick then
    M.clear(bufnr, "stale")
    log.warn("the buffer changed since the suggestion; nothing was applied")
    return false
  end
  M.clear(bufnr, "accepted")
  vim.lsp.util.apply_text_edits(p.edits, bufnr, p.encoding)
  log.info(p.kind .. " accepted")
  return true
end

function M.reject(bufnr)
  local had = pending[bufnr] ~= nil
  M.clear(bufnr, "rejected")
  return had
end

---Text edits for `bufnr` in a WorkspaceEdit (changes or documentChanges).
local function edits_for(bufnr, edit)
  local uri = vim.uri_from_bufnr(bufnr)
  local out = {}
  if type(edit.changes) == "table" then
    for _, e in ipairs(edit.changes[uri] or {}) do
      out[#out + 1] = e
    end
  end
  for _, change in ipairs(type(edit.documentChanges) == "table" and edit.documentChanges or {}) do
    if change.textDocument and change.textDocument.uri == uri then
      for _, e in ipairs(change.edits or {}) do
        out[#out + 1] = e
      end
    end
  end
  return out
end

local function rewrite_kind(provider)
  if type(provider) ~= "table" then
    return provider == true
  end
  local kinds = provider.codeActionKinds
  if kinds == nil then
    return true
  end
  for _, kind in ipairs(kinds) do
    if kind == "refactor" or vim.startswith(kind, "refactor.rewrite") then
      return true
    end
  end
  return false
end

---Asks the server for a block rewrite at the cursor (or over `range`: {start_row, end_row}, 1-based)
---and shows it.
---@param bufnr integer
---@param range? { [1]: integer, [2]: integer }
function M.rewrite(bufnr, range)
  local client = lsp.client(bufnr)
  if not client then
    log.warn("the server is not running in this buffer")
    return
  end
  if not rewrite_kind(client.server_capabilities.codeActionProvider) then
    log.warn("this dgemma-lsp has no block rewrite yet (no refactor.rewrite code action)")
    return
  end
  local encoding = client.offset_encoding
  local lsp_range
  if range then
    local last = vim.api.nvim_buf_get_lines(bufnr, range[2] - 1, range[2], false)[1] or ""
    lsp_range = {
      start = { line = range[1] - 1, character = 0 },
      ["end"] = { line = range[2] - 1, character = lsp.to_lsp_col(bufnr, range[2] - 1, #last, encoding) },
    }
  else
    local here = lsp.position(client, bufnr)
    lsp_range = { start = here, ["end"] = here }
  end
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = lsp_range,
    context = { diagnostics = {}, only = { "refactor.rewrite" }, triggerKind = 1 },
  }
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local function show(action)
    if vim.api.nvim_buf_get_changedtick(bufnr) ~= tick then
      return
    end
    local edits = action and action.edit and edits_for(bufnr, action.edit) or {}
    if #edits == 0 then
      log.info("no rewrite at the cursor")
      vim.api.nvim_echo({ { "dgemma: no rewrite here", "WarningMsg" } }, false, {})
      return
    end
    M.show(bufnr, "rewrite", edits, encoding)
  end
  lsp.request(client, "textDocument/codeAction", params, function(err, result)
    if err then
      log.warn("rewrite failed: " .. (err.message or vim.inspect(err)))
      return
    end
    for _, action in ipairs(result or {}) do
      if type(action.kind) == "string" and vim.startswith(action.kind, "refactor.rewrite") then
        local provider = client.server_capabilities.codeActionProvider
        if not action.edit and action.data ~= nil and type(provider) == "table" and provider.resolveProvider then
          lsp.request(client, "codeAction/resolve", action, function(rerr, resolved)
            if rerr then
              log.warn("rewrite failed: " .. (rerr.message or vim.inspect(rerr)))
              return
            end
            show(resolved)
          end, bufnr)
        else
          show(action)
        end
        return
      end
    end
    show(nil)
  end, bufnr)
end

---Asks the server for the next edit near the cursor and shows it.
---@param bufnr integer
---@param invoked boolean  asked by the user (messages) rather than automatically (silent)
function M.next_edit(bufnr, invoked)
  local client = lsp.client(bufnr)
  if not client or no_next_edit then
    if invoked and no_next_edit then
      log.warn("this dgemma-lsp has no next-edit suggestions yet")
    end
    return
  end
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local params = { textDocument = { uri = vim.uri_from_bufnr(bufnr) }, position = lsp.position(client, bufnr) }
  lsp.request(client, "dgemma/nextEdit", params, function(err, result)
    if err then
      if err.code == METHOD_NOT_FOUND then
        no_next_edit = true
        if invoked then
          log.warn("this dgemma-lsp has no next-edit suggestions yet")
        end
      else
        log.debug("nextEdit error: " .. vim.inspect(err))
      end
      return
    end
    if vim.api.nvim_buf_get_changedtick(bufnr) ~= tick then
      return
    end
    if type(result) ~= "table" or type(result.newText) ~= "string" or type(result.range) ~= "table" then
      if invoked then
        vim.api.nvim_echo({ { "dgemma: no next edit here", "WarningMsg" } }, false, {})
      end
      return
    end
    M.show(bufnr, "next_edit", { { range = result.range, newText = result.newText } }, client.offset_encoding)
  end, bufnr)
end

return M
