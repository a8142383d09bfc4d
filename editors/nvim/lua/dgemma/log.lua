---@brief A log file for the plugin (stdpath("log")/dgemma.log); vim.notify only for warnings and errors.

local M = {}

local LEVELS = { debug = 1, info = 2, warn = 3, error = 4 }
local NOTIFY = { warn = vim.log.levels.WARN, error = vim.log.levels.ERROR }

M.level = "warn"
M.file = nil ---@type string|nil

function M.path()
  return M.file or (vim.fn.stdpath("log") .. "/dgemma.log")
end

local function write(level, message)
  if LEVELS[level] < LEVELS[M.level] then
    return
  end
  local path = M.path()
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local handle = io.open(path, "a")
  if handle then
    handle:write(("%s %s %s\n"):format(os.date("%Y-%m-%d %H:%M:%S"), level:upper(), message))
    handle:close()
  end
end

---@param level "debug"|"info"|"warn"|"error"
---@param message string
function M.log(level, message)
  write(level, message)
  if NOTIFY[level] then
    vim.schedule(function()
      vim.notify("dgemma: " .. message, NOTIFY[level])
    end)
  end
end

function M.debug(message) write("debug", message) end
function M.info(message) write("info", message) end
function M.warn(message) M.log("warn", message) end
function M.error(message) M.log("error", message) end

return M
