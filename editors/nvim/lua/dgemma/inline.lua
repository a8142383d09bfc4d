---@brief Ghost text: vim.lsp.inline_completion on Neovim 0.12+, this plugin's extmarks before that.
--- One interface for the keys: visible, accept (all, word, line), dismiss, cycle.

local config_mod = require("dgemma.config")
local ghost = require("dgemma.ghost")
local log = require("dgemma.log")
local text = require("dgemma.text")

local M = {}

---@type "builtin"|"extmarks"
M.backend = "extmarks"

local builtin_ns ---@type integer|nil
local config ---@type dgemma.Config

local function builtin_visible(bufnr)
  builtin_ns = builtin_ns or vim.api.nvim_get_namespaces()["nvim.lsp.inline_completion"]
  if not builtin_ns then
    return false
  end
  return #vim.api.nvim_buf_get_extmarks(bufnr, builtin_ns, 0, -1, { limit = 1 }) > 0
end

---Part of a built-in item: what is left of it after the text typed since it was made.
---@param bufnr integer
---@param item vim.lsp.inline_completion.Item
---@param how "word"|"line"
local function builtin_partial(bufnr, item, how)
  local insert = type(item.insert_text) == "string" and item.insert_text or item.insert_text.value
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  row = row - 1
  local rest = insert
  if item.range then
    local start = item.range.start
    if start.row == row and start.col <= col then
      rest = text.remaining(insert, vim.api.nvim_buf_get_text(bufnr, row, start.col, row, col, {})[1] or "")
    end
  end
  if not rest or rest == "" then
    return
  end
  local piece = how == "word" and text.next_word(rest) or text.next_line(rest)
  local lines = vim.split(piece, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
  vim.api.nvim_win_set_cursor(0, { row + #lines, #lines == 1 and col + #lines[1] or #lines[#lines] })
end

---@param opts dgemma.Config
function M.setup(opts)
  config = opts
  M.backend = config_mod.backend(opts)
end

---@param bufnr integer
---@param config dgemma.Config
function M.attach(bufnr, config)
  if M.backend == "builtin" then
    vim.lsp.inline_completion.enable(config.inline.enabled, { bufnr = bufnr })
  else
    ghost.attach(bufnr, config)
  end
end

function M.detach(bufnr)
  if M.backend == "builtin" then
    pcall(vim.lsp.inline_completion.enable, false, { bufnr = bufnr })
  else
    ghost.detach(bufnr)
  end
end

---Turns ghost text on or off in a buffer.
function M.set_enabled(bufnr, enabled)
  vim.b[bufnr].dgemma_disabled = not enabled
  if M.backend == "builtin" then
    vim.lsp.inline_completion.enable(enabled, { bufnr = bufnr })
  elseif not enabled then
    ghost.clear(bufnr)
  end
end

---Asks for a suggestion at the cursor now (the model just became ready), in insert mode.
function M.ask(bufnr)
  if vim.b[bufnr].dgemma_disabled or config_mod.manual(config) then
    return
  end
  if M.backend == "extmarks" then
    ghost.ask(bufnr)
  elseif vim.api.nvim_get_mode().mode:sub(1, 1) == "i" then
    -- vim.lsp.inline_completion asks on CursorMovedI; it has no call of its own for this.
    vim.api.nvim_exec_autocmds("CursorMovedI", { buffer = bufnr, modeline = false })
  end
end

---The built-in backend's state for a buffer. vim.lsp.inline_completion asks by itself only as you type
---(its get() accepts, nothing asks): its own request method, private, is the one way to ask now.
---@param bufnr integer
---@return table|nil
local function builtin_completor(bufnr)
  local ok, capability = pcall(require, "vim.lsp._capability")
  local completor = ok and type(capability.all) == "table" and capability.all.inline_completion
  completor = completor and completor.active and completor.active[bufnr]
  return completor and type(completor.request) == "function" and completor or nil
end

---Asks for a suggestion at the cursor now (the suggest key): shown whatever the eagerness.
---@return boolean asked
function M.suggest(bufnr)
  if vim.b[bufnr].dgemma_disabled then
    return false
  end
  if M.backend == "extmarks" then
    return ghost.suggest(bufnr)
  end
  local completor = builtin_completor(bufnr)
  if not completor then
    log.warn('this Neovim\'s vim.lsp.inline_completion cannot be asked: set inline = { backend = "extmarks" }')
    return false
  end
  if type(completor.reset_timer) == "function" then
    completor:reset_timer() -- the request the last key would have made: this one replaces it
  end
  completor:request(vim.lsp.protocol.InlineCompletionTriggerKind.Invoked)
  return true
end

---The accept key found nothing to accept and types itself (Tab indents): no suggestion for that change.
function M.fell_through(bufnr)
  if M.backend == "extmarks" then
    ghost.quiet(bufnr)
  end
end

function M.visible(bufnr)
  if M.backend == "builtin" then
    return builtin_visible(bufnr)
  end
  return ghost.visible(bufnr)
end

---@param how "all"|"word"|"line"
---@return boolean accepted
function M.accept(bufnr, how)
  if M.backend == "extmarks" then
    return ghost.accept(bufnr, how)
  end
  if not builtin_visible(bufnr) then
    return false
  end
  if how == "all" then
    return vim.lsp.inline_completion.get({ bufnr = bufnr })
  end
  return vim.lsp.inline_completion.get({
    bufnr = bufnr,
    on_accept = function(item)
      builtin_partial(bufnr, item, how)
    end,
  })
end

function M.dismiss(bufnr)
  if M.backend == "extmarks" then
    return ghost.dismiss(bufnr)
  end
  if not builtin_visible(bufnr) then
    return false
  end
  -- There is no public "hide": accepting into a handler that inserts nothing aborts it.
  return vim.lsp.inline_completion.get({ bufnr = bufnr, on_accept = function() end })
end

function M.cycle(bufnr, step)
  if M.backend == "extmarks" then
    return ghost.cycle(bufnr, step)
  end
  if not builtin_visible(bufnr) then
    return false
  end
  vim.lsp.inline_completion.select({ bufnr = bufnr, count = step })
  return true
end

return M
