-- :Dgemma <action>; the plugin does nothing else until require("dgemma").setup() is called.
if vim.g.loaded_dgemma then
  return
end
vim.g.loaded_dgemma = true

vim.api.nvim_create_user_command("Dgemma", function(cmd)
  require("dgemma").command(cmd)
end, {
  nargs = "?",
  range = true,
  desc = "dgemma: toggle, restart, status, log, rewrite, next_edit, accept_edit, reject_edit, ...",
  complete = function(lead)
    local names = vim.tbl_keys(require("dgemma").actions)
    table.sort(names)
    return vim.tbl_filter(function(name)
      return vim.startswith(name, lead)
    end, names)
  end,
})
