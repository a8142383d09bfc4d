---@brief The server: configured and enabled with vim.lsp.config / vim.lsp.enable (0.11+), or started
---with vim.lsp.start on FileType (0.10); request helpers that work on 0.10 to 0.12.

local log = require("dgemma.log")

local M = {}

M.name = "dgemma"

---@class dgemma.Status
---@field state "none"|"loading"|"ready"|"failed"
---@field model string|nil
---@field device string|nil
---@field lastLatencyMs number|nil of the last answer the model computed
---@field lastSource string|nil model, lookup, structure, next_token, typed_through, cache or speculative
---@field error string|nil
---@field indexing { files: integer, total: integer|nil }|nil while the workspace is indexed

---@type dgemma.Status|nil
M.status = nil

local has_011 = vim.fn.has("nvim-0.11") == 1
local NIL = vim.NIL

local function clean(value)
  if value == NIL then
    return nil
  end
  return value
end

---@param result table
local function on_status(_, result, _)
  if type(result) ~= "table" then
    return
  end
  local was_ready = M.status ~= nil and M.status.state == "ready"
  M.status = {
    state = clean(result.state) or "none",
    model = clean(result.model),
    device = clean(result.device),
    lastLatencyMs = clean(result.lastLatencyMs),
    lastSource = clean(result.lastSource),
    error = clean(result.error),
    indexing = clean(result.indexing),
  }
  log.debug("status " .. vim.inspect(M.status, { newline = " ", indent = "" }))
  local ready = not was_ready and M.status.state == "ready"
  vim.schedule(function()
    pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "DgemmaStatus", modeline = false })
    if ready then
      pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "DgemmaReady", modeline = false })
    end
    pcall(vim.cmd.redrawstatus)
  end)
end

---A table that goes out as a JSON object even when empty (an empty Lua table is encoded as a list).
---@param options table
---@return table
function M.as_object(options)
  return next(options) == nil and vim.empty_dict() or options
end

---Neovim's client capabilities, and the custom notifications this plugin handles: the server sends
---`dgemma/status` only to clients that declare it (other clients get standard LSP only), and the
---settling canvas and the low-confidence parts only to one whose ghost text draws them (extmarks).
---@param drawn_here boolean the extmarks backend draws the ghost text
---@return lsp.ClientCapabilities|table
function M.capabilities(drawn_here)
  return vim.tbl_deep_extend("force", vim.lsp.protocol.make_client_capabilities(), {
    experimental = { dgemma = { status = true, resolving = drawn_here, confidence = drawn_here } },
  })
end

---A notification handler that hands its params to the extmarks backend's `name` function (required
---late: ghost.lua requires this module).
local function to_ghost(name)
  return function(_, result, _)
    if type(result) == "table" then
      require("dgemma.ghost")[name](result)
    end
  end
end

---The vim.lsp client configuration.
---@param config dgemma.Config
---@return vim.lsp.ClientConfig|table
function M.client_config(config)
  return {
    name = M.name,
    cmd = config.cmd,
    filetypes = config.filetypes,
    root_markers = config.root_markers,
    init_options = M.as_object(config.server),
    capabilities = M.capabilities(require("dgemma.config").backend(config) == "extmarks"),
    handlers = {
      ["dgemma/status"] = on_status,
      ["dgemma/resolving"] = to_ghost("on_resolving"),
      ["dgemma/confidence"] = to_ghost("on_confidence"),
    },
  }
end

---@param bufnr integer
---@return boolean
local function wanted(config, bufnr)
  if vim.bo[bufnr].buftype ~= "" or vim.api.nvim_buf_get_name(bufnr) == "" then
    return false
  end
  return config.filetypes == nil or vim.tbl_contains(config.filetypes, vim.bo[bufnr].filetype)
end

local augroup = vim.api.nvim_create_augroup("dgemma.lsp", { clear = true })

---Starts the server in the buffer (0.10 path, and restarts).
---@param config dgemma.Config
---@param bufnr integer
function M.start(config, bufnr)
  if not wanted(config, bufnr) then
    return
  end
  local client_config = M.client_config(config)
  local root = vim.fs.root and vim.fs.root(bufnr, config.root_markers) or nil
  client_config.root_dir = root -- nil: single-file mode, as vim.lsp.enable does without a marker
  client_config.root_markers = nil
  vim.lsp.start(client_config, { bufnr = bufnr })
end

---@param config dgemma.Config
function M.setup(config)
  vim.api.nvim_clear_autocmds({ group = augroup })
  if vim.fn.executable(config.cmd[1]) ~= 1 then
    log.warn(
      ("the server command %q was not found: install dgemma-lsp (pip install dgemma-lsp) and put it on PATH, "
        .. "or set cmd = { '/full/path/to/dgemma-lsp', '--stdio' } in setup(); :checkhealth dgemma"):format(
        config.cmd[1]
      )
    )
  end
  if has_011 and vim.lsp.config and vim.lsp.enable then
    vim.lsp.config(M.name, M.client_config(config))
    vim.lsp.enable(M.name)
    return
  end
  vim.api.nvim_create_autocmd("FileType", {
    group = augroup,
    callback = function(event)
      M.start(config, event.buf)
    end,
  })
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].filetype ~= "" then
      M.start(config, bufnr)
    end
  end
end

---@param bufnr integer|nil
---@return vim.lsp.Client|nil
function M.client(bufnr)
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  return get({ name = M.name, bufnr = bufnr })[1]
end

---Sends a request (client:request on 0.11+, client.request on 0.10); returns the request id.
---@return integer|nil
function M.request(client, method, params, handler, bufnr)
  local ok, id
  if has_011 then
    ok, id = client:request(method, params, handler, bufnr)
  else
    ok, id = client.request(method, params, handler, bufnr)
  end
  return ok and id or nil
end

---Cancels a request still pending (Neovim logs an [ERROR] for a cancel of one that has finished).
function M.cancel(client, id)
  local request = id ~= nil and client.requests and client.requests[id]
  if not request or request.type ~= "pending" then
    return
  end
  if has_011 then
    client:cancel_request(id)
  else
    client.cancel_request(id)
  end
end

function M.notify(client, method, params)
  if has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

---Whether the server offers a method (server capabilities).
function M.supports(client, method)
  if has_011 then
    return client:supports_method(method)
  end
  return client.supports_method(method)
end

---The LSP position of the cursor in the client's encoding.
---@return { line: integer, character: integer }
function M.position(client, bufnr)
  local win = vim.fn.bufwinid(bufnr)
  local row, col = unpack(vim.api.nvim_win_get_cursor(win ~= -1 and win or 0))
  return { line = row - 1, character = M.to_lsp_col(bufnr, row - 1, col, client.offset_encoding) }
end

---Byte column -> LSP character in `encoding`.
function M.to_lsp_col(bufnr, row, col, encoding)
  if encoding == "utf-8" then
    return col
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  local prefix = line:sub(1, col)
  if has_011 then
    return vim.str_utfindex(prefix, encoding, nil, false)
  end
  local utf32, utf16 = vim.str_utfindex(prefix)
  return encoding == "utf-16" and utf16 or utf32
end

---LSP character in `encoding` -> byte column.
function M.to_byte_col(bufnr, row, character, encoding)
  if encoding == "utf-8" then
    return character
  end
  return M.text_byte_index(vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or "", character, encoding)
end

---Index in `encoding` (an LSP position's unit) into `s` -> byte offset.
function M.text_byte_index(s, index, encoding)
  if encoding == "utf-8" then
    return math.min(index, #s)
  end
  local ok, byte
  if has_011 then
    ok, byte = pcall(vim.str_byteindex, s, encoding, index, false)
  else
    ok, byte = pcall(vim.str_byteindex, s, index, encoding == "utf-16")
  end
  return ok and byte or #s
end

---Stops the server and starts it again in the buffers it served.
---@param config dgemma.Config
function M.restart(config)
  local clients = (vim.lsp.get_clients or vim.lsp.get_active_clients)({ name = M.name })
  local buffers = {}
  for _, client in ipairs(clients) do
    for bufnr in pairs(client.attached_buffers) do
      buffers[#buffers + 1] = bufnr
    end
    if has_011 then
      client:stop()
    else
      client.stop()
    end
  end
  M.status = nil
  vim.wait(3000, function()
    for _, client in ipairs(clients) do
      if not (has_011 and client:is_stopped() or (not has_011 and client.is_stopped())) then
        return false
      end
    end
    return true
  end, 50)
  for _, bufnr in ipairs(buffers) do
    if vim.api.nvim_buf_is_valid(bufnr) then
      M.start(config, bufnr)
    end
  end
  log.info("server restarted")
end

return M
