---@brief :checkhealth dgemma

local M = {}

function M.check()
  local health = vim.health
  health.start("dgemma: Neovim")
  local v = vim.version()
  local version = ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.10") ~= 1 then
    health.error("Neovim " .. version .. " is too old: 0.10 or newer is needed")
    return
  end
  health.ok("Neovim " .. version)
  local dgemma = require("dgemma")
  local config = dgemma.config
  if not config then
    health.warn('setup() was not called', { 'Add require("dgemma").setup({}) to your config' })
    return
  end
  local backend = require("dgemma.config").backend(config)
  if backend == "builtin" then
    health.ok("ghost text: vim.lsp.inline_completion (built in)")
    health.info("it can show suggestions that no longer fit what you typed: see :help dgemma-backends")
  else
    health.ok("ghost text: drawn by dgemma with extmarks")
  end
  health.info("server and ghost-text management: " .. (vim.lsp.config and "vim.lsp.config + vim.lsp.enable" or "vim.lsp.start on FileType"))

  health.start("dgemma: server")
  local cmd = config.cmd[1]
  local path = vim.fn.exepath(cmd)
  if path == "" then
    health.error(("the server command %q was not found"):format(cmd), {
      "pip install dgemma-lsp (or pip install -e . in a checkout), in a virtualenv",
      "then put its bin folder on PATH, or set cmd = { '/path/to/.venv/bin/dgemma-lsp', '--stdio' } in setup()",
    })
  else
    health.ok("server command: " .. path .. " " .. table.concat(vim.list_slice(config.cmd, 2), " "))
  end
  local client = require("dgemma.lsp").client()
  if not client then
    health.info("no dgemma client is running (it starts when a file is opened)")
  else
    health.ok(("client %d running, position encoding %s"):format(client.id, client.offset_encoding))
    local caps = client.server_capabilities or {}
    if caps.inlineCompletionProvider then
      health.ok("the server offers inline completion")
    else
      health.error("the server does not advertise inlineCompletionProvider")
    end
    health.info("block rewrite: " .. (caps.codeActionProvider and "offered" or "not offered by this server"))
    local status = dgemma.status()
    if status == nil then
      health.info("no dgemma/status from the server yet")
    elseif status.state == "ready" then
      health.ok(("model %s on %s"):format(status.model or "?", status.device or "?"))
    elseif status.state == "failed" then
      health.error(("model %s failed to load: %s"):format(status.model or "?", status.error or "?"), {
        "Set server = { model = ... } in setup() to a checkpoint folder, a cached Hugging Face id or a URL",
      })
    else
      health.info("model: " .. status.state)
    end
  end

  local completion = type(config.server.completion) == "table" and config.server.completion or {}
  health.info(("suggestions: eagerness %s, trigger %s%s"):format(
    completion.eagerness or "balanced (the server's default)",
    completion.trigger or "automatic (the server's default)",
    require("dgemma.config").manual(config) and ": only the suggest key asks" or ""))

  health.start("dgemma: keys")
  for _, name in ipairs(require("dgemma.config").key_names) do
    local lhs = config.keys[name]
    health.info(("%s: %s"):format(name, lhs or "(not mapped)"))
  end

  health.start("dgemma: logs")
  local log = require("dgemma.log")
  if vim.uv.fs_stat(log.path()) then
    health.info("plugin log: " .. log.path())
  else
    health.info(("plugin log: nothing logged yet (level %s and above go to %s)"):format(log.level, log.path()))
  end
  local lsp_log = require("vim.lsp.log").get_filename()
  if vim.uv.fs_stat(lsp_log) then
    health.info("Neovim's LSP log (the server's warnings and errors): " .. lsp_log)
  end
end

return M
