---@brief Options of the dgemma plugin: the documented defaults, merged with the user's and checked.

local M = {}

---@class dgemma.Keys
---@field suggest string|false       Ask for a suggestion now (insert mode): shown whatever the eagerness.
---@field accept string|false        Accept the whole suggestion (insert mode).
---@field accept_word string|false   Accept the next word of it.
---@field accept_line string|false   Accept the rest of its current line.
---@field dismiss string|false       Hide it.
---@field next string|false          Show the next candidate.
---@field prev string|false          Show the previous candidate.
---@field edit_accept string|false   Accept a shown block rewrite / next edit (normal mode, only while shown).
---@field edit_reject string|false   Reject it.

---@class dgemma.Config
---@field cmd string[]                      The server command.
---@field filetypes string[]|nil            Filetypes to attach to; nil: every file.
---@field root_markers string[]             Files that mark a project root (the server works without one).
---@field server table                      Server options (camelCase, see |dgemma-server-options|).
---@field inline { enabled: boolean, backend: "auto"|"builtin"|"extmarks", debounce_ms: integer, accept_after_ms: integer }
---@field keys dgemma.Keys
---@field next_edit { auto: boolean, debounce_ms: integer }
---@field log { level: "debug"|"info"|"warn"|"error", file: string|nil }

---@type dgemma.Config
M.defaults = {
  cmd = { "dgemma-lsp", "--stdio" },
  filetypes = nil,
  root_markers = { ".git" },
  -- Passed as they are to the server (initializationOptions); empty means the server's defaults.
  -- Example: { model = "~/models/dgemma", device = "cuda", completion = { latencyBudgetMs = 400 } }
  -- completion.eagerness ("quiet", "balanced", "eager") and completion.trigger ("automatic", "manual")
  -- are checked here; with "manual" the plugin asks only when keys.suggest is pressed.
  server = {},
  inline = {
    enabled = true,
    -- "extmarks": this plugin draws the ghost text (every version); "builtin": Neovim 0.12's
    -- vim.lsp.inline_completion, which redraws a suggestion after keys that no longer fit it and can
    -- show an answer to an older request (see :help dgemma-backends); "auto": builtin when there is one.
    backend = "extmarks",
    debounce_ms = 150, -- extmarks backend: wait this long after a keystroke before asking
    -- extmarks backend: the keys take a suggestion only once it has been shown this long; a key
    -- pressed sooner (a second quick Tab after an accept) does what it does without one.
    accept_after_ms = 300,
  },
  keys = {
    suggest = "<M-\\>", -- as copilot.vim's key and the extension's Alt+\ in VS Code
    accept = "<Tab>", -- falls back to a plain <Tab> when no suggestion is shown
    accept_word = "<C-Right>",
    accept_line = "<C-Down>",
    dismiss = "<C-]>",
    next = "<M-]>",
    prev = "<M-[>",
    edit_accept = "<Tab>",
    edit_reject = "<Esc>",
  },
  next_edit = {
    auto = false, -- ask for a next-edit suggestion when leaving insert mode
    debounce_ms = 500,
  },
  log = {
    level = "warn",
    file = nil, -- nil: stdpath("log") .. "/dgemma.log"
  },
}

---The keys of `keys`, in the order they are documented (and listed by :checkhealth).
M.key_names = { "suggest", "accept", "accept_word", "accept_line", "dismiss", "next", "prev", "edit_accept", "edit_reject" }

M.eagerness = { "quiet", "balanced", "eager" }
M.triggers = { "automatic", "manual" }

---@param name string
---@param value any
---@param kind string|string[]
---@param optional boolean?
local function check(name, value, kind, optional)
  if vim.fn.has("nvim-0.11") == 1 then
    vim.validate(name, value, kind, optional)
  else
    vim.validate({ [name] = { value, kind, optional } })
  end
end

local function one_of(name, value, allowed)
  if not vim.tbl_contains(allowed, value) then
    error(("%s: expected one of %s, got %s"):format(name, table.concat(allowed, ", "), vim.inspect(value)), 0)
  end
end

---Merges `opts` over the defaults and checks the result; raises an error naming the bad option.
---@param opts table|nil
---@return dgemma.Config
function M.resolve(opts)
  check("opts", opts, "table", true)
  local config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  if opts and opts.cmd then
    config.cmd = opts.cmd -- a list replaces, it does not merge index by index
  end
  if opts and opts.root_markers then
    config.root_markers = opts.root_markers
  end
  check("cmd", config.cmd, "table")
  check("cmd[1]", config.cmd[1], "string")
  check("filetypes", config.filetypes, "table", true)
  check("root_markers", config.root_markers, "table")
  check("server", config.server, "table")
  local completion = config.server.completion
  if completion ~= nil then
    check("server.completion", completion, "table")
    if completion.eagerness ~= nil then
      one_of("server.completion.eagerness", completion.eagerness, M.eagerness)
    end
    if completion.trigger ~= nil then
      one_of("server.completion.trigger", completion.trigger, M.triggers)
    end
  end
  check("inline", config.inline, "table")
  check("inline.enabled", config.inline.enabled, "boolean")
  one_of("inline.backend", config.inline.backend, { "auto", "builtin", "extmarks" })
  check("inline.debounce_ms", config.inline.debounce_ms, "number")
  check("inline.accept_after_ms", config.inline.accept_after_ms, "number")
  check("keys", config.keys, "table")
  for _, key in ipairs(M.key_names) do
    local value = config.keys[key]
    if value ~= false then
      check("keys." .. key, value, "string")
    end
  end
  check("next_edit.auto", config.next_edit.auto, "boolean")
  check("next_edit.debounce_ms", config.next_edit.debounce_ms, "number")
  one_of("log.level", config.log.level, { "debug", "info", "warn", "error" })
  check("log.file", config.log.file, "string", true)
  return config
end

---Whether suggestions come only when asked for (`server.completion.trigger = "manual"`): then the
---plugin sends no request of its own while you type.
---@param config dgemma.Config
---@return boolean
function M.manual(config)
  local completion = config.server.completion
  return type(completion) == "table" and completion.trigger == "manual"
end

---Which ghost-text backend this Neovim gets.
---@param config dgemma.Config
---@return "builtin"|"extmarks"
function M.backend(config)
  local has_builtin = vim.lsp.inline_completion ~= nil and vim.lsp.inline_completion.get ~= nil
  if config.inline.backend == "builtin" and not has_builtin then
    return "extmarks"
  end
  if config.inline.backend == "auto" then
    return has_builtin and "builtin" or "extmarks"
  end
  return config.inline.backend
end

return M
