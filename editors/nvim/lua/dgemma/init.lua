---@brief dgemma: inline completions, block rewrites and next edits from dgemma-lsp (DiffusionGemma).
---
--- require("dgemma").setup({ ... })   -- see :help dgemma-config for the options and their defaults

local config_mod = require("dgemma.config")
local inline = require("dgemma.inline")
local log = require("dgemma.log")
local lsp = require("dgemma.lsp")
local preview = require("dgemma.preview")

local M = {}

---@type dgemma.Config|nil
M.config = nil

local augroup = vim.api.nvim_create_augroup("dgemma", { clear = true })

-- The ghost text's terminal colour when the colour scheme gives none: 8, grey in 16- and 256-colour
-- terminals. Neovim's default scheme colours ComplHint and Comment for the GUI only, so without
-- 'termguicolors' (the default inside tmux) a ghost linked to them looked like code.
local GHOST_CTERM = 8
local DIM_CTERM = 239 -- a darker grey of the 256-colour palette (a 16-colour terminal shows it as 8's)

local function highlights()
  local set = function(name, link)
    vim.api.nvim_set_hl(0, name, { link = link, default = true })
  end
  local base = vim.fn.hlexists("ComplHint") == 1 and "ComplHint" or "Comment"
  local ghost = vim.api.nvim_get_hl(0, { name = base, link = false })
  vim.api.nvim_set_hl(0, "DgemmaSuggestion", {
    default = true,
    fg = ghost.fg,
    ctermfg = ghost.ctermfg or GHOST_CTERM,
    italic = ghost.italic,
  })
  set("DgemmaSuggestionInfo", "DgemmaSuggestion")
  -- The unsure parts (a partial's unsettled runs, an answer's low-confidence tokens): the ghost's colour
  -- halfway to the background, a darker grey in the terminal's palette.
  local background = vim.api.nvim_get_hl(0, { name = "Normal", link = false }).bg or 0
  local fg = ghost.fg or 0x808080
  local half = 0
  for shift = 0, 16, 8 do
    local mixed = math.floor(((bit.rshift(fg, shift) % 256) + (bit.rshift(background, shift) % 256)) / 2)
    half = half + bit.lshift(mixed, shift)
  end
  vim.api.nvim_set_hl(0, "DgemmaSuggestionDim", { default = true, fg = half, ctermfg = DIM_CTERM, italic = ghost.italic })
  set("DgemmaSuggestionUnsettled", "DgemmaSuggestionDim")
  set("DgemmaSuggestionLow", "DgemmaSuggestionDim")
  set("DgemmaEditAdd", "DiffAdd")
  set("DgemmaEditHint", "Comment")
  -- The replaced text: DiffDelete's colours, struck through.
  local delete = vim.api.nvim_get_hl(0, { name = "DiffDelete", link = false })
  vim.api.nvim_set_hl(0, "DgemmaEditDelete", { default = true, fg = delete.fg, bg = delete.bg, strikethrough = true })
end

---Insert-mode key: does `action` when a suggestion is shown, else types the key itself (so <Tab>
---still indents when there is nothing to accept); `fell_through` runs before it does.
local function smart_key(lhs, action, desc, bufnr, fell_through)
  if not lhs then
    return
  end
  vim.keymap.set("i", lhs, function()
    if not action() then
      if fell_through then
        fell_through()
      end
      vim.api.nvim_feedkeys(vim.keycode(lhs), "n", false)
    end
  end, { buffer = bufnr, desc = desc, silent = true })
end

local function attach(bufnr)
  local config = assert(M.config)
  inline.attach(bufnr, config)
  if vim.b[bufnr].dgemma_disabled or not config.inline.enabled then
    inline.set_enabled(bufnr, false)
  end
  local keys = config.keys
  if keys.suggest then
    vim.keymap.set("i", keys.suggest, function() inline.suggest(bufnr) end,
      { buffer = bufnr, desc = "dgemma: ask for a suggestion", silent = true })
  end
  smart_key(keys.accept, function() return inline.accept(bufnr, "all") end, "dgemma: accept suggestion", bufnr,
    function() inline.fell_through(bufnr) end) -- a Tab that indents asks for nothing
  smart_key(keys.accept_word, function() return inline.accept(bufnr, "word") end, "dgemma: accept word", bufnr)
  smart_key(keys.accept_line, function() return inline.accept(bufnr, "line") end, "dgemma: accept line", bufnr)
  smart_key(keys.dismiss, function() return inline.dismiss(bufnr) end, "dgemma: dismiss suggestion", bufnr)
  smart_key(keys.next, function() return inline.cycle(bufnr, 1) end, "dgemma: next candidate", bufnr)
  smart_key(keys.prev, function() return inline.cycle(bufnr, -1) end, "dgemma: previous candidate", bufnr)
  if config.next_edit.auto then
    vim.api.nvim_create_autocmd("InsertLeave", {
      group = augroup,
      buffer = bufnr,
      callback = function()
        vim.defer_fn(function()
          if vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_get_mode().mode == "n" then
            preview.next_edit(bufnr, false)
          end
        end, config.next_edit.debounce_ms)
      end,
    })
  end
  log.info(("attached to buffer %d (%s ghost text)"):format(bufnr, inline.backend))
end

---@param opts dgemma.Config|table|nil
function M.setup(opts)
  local ok, config = pcall(config_mod.resolve, opts)
  if not ok then
    vim.notify("dgemma: bad setup() options: " .. tostring(config), vim.log.levels.ERROR)
    return
  end
  if vim.fn.has("nvim-0.10") ~= 1 then
    vim.notify("dgemma: Neovim 0.10 or newer is needed", vim.log.levels.ERROR)
    return
  end
  M.config = config
  log.level, log.file = config.log.level, config.log.file
  highlights()
  inline.setup(config)
  preview.setup(config)
  vim.api.nvim_clear_autocmds({ group = augroup })
  vim.api.nvim_create_autocmd("ColorScheme", { group = augroup, callback = highlights })
  -- Keys typed while the model loaded got no suggestion: ask again at the cursor once it is ready.
  vim.api.nvim_create_autocmd("User", {
    group = augroup,
    pattern = "DgemmaReady",
    callback = function()
      local bufnr = vim.api.nvim_get_current_buf()
      if lsp.client(bufnr) then
        inline.ask(bufnr)
      end
    end,
  })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = augroup,
    callback = function(event)
      local client = vim.lsp.get_client_by_id(event.data.client_id)
      if client and client.name == lsp.name then
        attach(event.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("LspDetach", {
    group = augroup,
    callback = function(event)
      local client = vim.lsp.get_client_by_id(event.data.client_id)
      if client and client.name == lsp.name then
        inline.detach(event.buf)
        preview.clear(event.buf, "detached")
      end
    end,
  })
  lsp.setup(config)
end

local function need_setup()
  if not M.config then
    vim.notify('dgemma: call require("dgemma").setup() first', vim.log.levels.WARN)
    return false
  end
  return true
end

---Whether a suggestion is shown in the buffer (for your own <Tab> mapping, say).
function M.visible(bufnr)
  return inline.visible(bufnr or vim.api.nvim_get_current_buf())
end

---Asks for a suggestion at the cursor now, in insert mode (the `suggest` key): the server answers
---whatever its eagerness, and also with `completion.trigger = "manual"`. False when it cannot ask.
function M.suggest()
  local bufnr = vim.api.nvim_get_current_buf()
  if vim.api.nvim_get_mode().mode:sub(1, 1) ~= "i" then
    vim.notify("dgemma: a suggestion is shown in insert mode: map <Cmd>Dgemma suggest<CR> there", vim.log.levels.WARN)
    return false
  end
  return lsp.client(bufnr) ~= nil and inline.suggest(bufnr)
end

function M.accept() return inline.accept(vim.api.nvim_get_current_buf(), "all") end
function M.accept_word() return inline.accept(vim.api.nvim_get_current_buf(), "word") end
function M.accept_line() return inline.accept(vim.api.nvim_get_current_buf(), "line") end
function M.dismiss() return inline.dismiss(vim.api.nvim_get_current_buf()) end
function M.next() return inline.cycle(vim.api.nvim_get_current_buf(), 1) end
function M.prev() return inline.cycle(vim.api.nvim_get_current_buf(), -1) end

---Turns inline completions on or off (all buffers); nil flips.
---@param enabled boolean|nil
function M.toggle(enabled)
  if not need_setup() then
    return
  end
  local config = assert(M.config)
  if enabled == nil then
    enabled = not config.inline.enabled
  end
  config.inline.enabled = enabled
  local client = lsp.client()
  for bufnr in pairs(client and client.attached_buffers or {}) do
    inline.set_enabled(bufnr, enabled)
  end
  vim.api.nvim_echo({ { "dgemma: inline completions " .. (enabled and "on" or "off") } }, false, {})
  pcall(vim.cmd.redrawstatus)
end

---Block rewrite at the cursor, or over lines `line1`..`line2`.
function M.rewrite(line1, line2)
  if need_setup() then
    preview.rewrite(vim.api.nvim_get_current_buf(), line1 and { line1, line2 } or nil)
  end
end

function M.next_edit()
  if need_setup() then
    preview.next_edit(vim.api.nvim_get_current_buf(), true)
  end
end

function M.accept_edit() return preview.accept(vim.api.nvim_get_current_buf()) end
function M.reject_edit() return preview.reject(vim.api.nvim_get_current_buf()) end

function M.restart()
  if need_setup() then
    lsp.restart(assert(M.config))
  end
end

---Sends new server options (merged over the current ones) without a restart.
---@param server table
function M.configure(server)
  if not need_setup() then
    return
  end
  local config = assert(M.config)
  config.server = vim.tbl_deep_extend("force", config.server, server or {})
  local settings = { dgemma = lsp.as_object(config.server) }
  for _, client in ipairs((vim.lsp.get_clients or vim.lsp.get_active_clients)({ name = lsp.name })) do
    lsp.notify(client, "workspace/didChangeConfiguration", { settings = settings })
  end
end

---Thousands separated by commas: 1,234.
local function count(n)
  local digits = tostring(math.floor(n))
  return (digits:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

---The status text after the model's name: device, last model latency, "failing", the index's progress.
---@param status dgemma.Status
local function details(status)
  local parts = {}
  if status.device then
    parts[#parts + 1] = status.device
  end
  if status.lastLatencyMs then
    parts[#parts + 1] = ("%dms"):format(math.floor(status.lastLatencyMs + 0.5))
  end
  if status.error then
    parts[#parts + 1] = "failing" -- ready, but the last engine call failed (a remote server)
  end
  local indexing = status.indexing
  if type(indexing) == "table" then
    local total = type(indexing.total) == "number" and "/" .. count(indexing.total) or ""
    parts[#parts + 1] = "indexing " .. count(indexing.files) .. total
  end
  return parts
end

---A statusline component: "dgemma: <model> <device>[ <latency>ms][ indexing <files>[/<total>]]",
---"dgemma: loading[ <model>]", "dgemma: <model> failed", "dgemma: <model> ... failing" while a remote
---engine fails, "dgemma: off", "" in a window whose buffer the server does not serve
---(:help dgemma-statusline).
---@return string
function M.statusline()
  local status = lsp.status
  -- The window being drawn: a :checkhealth or help window under a code window shows nothing.
  local win = vim.g.statusline_winid
  local bufnr = win and vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win)
    or vim.api.nvim_get_current_buf()
  if not lsp.client(bufnr) then
    return ""
  end
  if M.config and not M.config.inline.enabled then
    return "dgemma: off"
  end
  if not status or status.state == "none" then
    return "dgemma: loading" -- the server is up and about to load its model
  end
  local model = status.model and vim.fn.fnamemodify(status.model, ":t") or "model"
  if model == "" then
    model = status.model or "model"
  end
  if status.state == "loading" then
    return "dgemma: loading " .. model
  end
  if status.state == "failed" then
    return "dgemma: " .. model .. " failed"
  end
  return table.concat({ "dgemma:", model, unpack(details(status)) }, " ")
end

---The `dgemma/status` of the server, or nil before the first.
---@return dgemma.Status|nil
function M.status()
  return lsp.status
end

function M.open_log()
  vim.cmd.split(vim.fn.fnameescape(log.path()))
end

M.actions = {
  toggle = function() M.toggle() end,
  enable = function() M.toggle(true) end,
  disable = function() M.toggle(false) end,
  restart = M.restart,
  status = function()
    local line = M.statusline()
    vim.api.nvim_echo({ { line ~= "" and line or "dgemma: not running in this buffer" } }, false, {})
  end,
  log = M.open_log,
  rewrite = function(cmd)
    if cmd.range > 0 then
      M.rewrite(cmd.line1, cmd.line2)
    else
      M.rewrite()
    end
  end,
  next_edit = M.next_edit,
  accept_edit = M.accept_edit,
  reject_edit = M.reject_edit,
  suggest = function() M.suggest() end,
  accept = M.accept,
  accept_word = M.accept_word,
  accept_line = M.accept_line,
  dismiss = M.dismiss,
  next = M.next,
  prev = M.prev,
}

---The :Dgemma command.
function M.command(cmd)
  local name = cmd.fargs[1] or "status"
  local action = M.actions[name]
  if not action then
    vim.notify("dgemma: unknown action " .. name .. "; try :Dgemma <Tab>", vim.log.levels.ERROR)
    return
  end
  action(cmd)
end

return M
